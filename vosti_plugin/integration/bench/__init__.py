"""Benchmarks: vosti vs stock vLLM (default and batch-invariant mode), each mode in its own process."""
