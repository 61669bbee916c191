"""Tensor parallelism at a fixed TP size: the reduction across ranks in an order nothing else decides."""
