"""Integration harnesses and benchmarks that run real vLLM (CPU CI and the GPU target)."""
