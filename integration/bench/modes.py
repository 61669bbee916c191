"""The benchmark modes and what each sets: environment (before vLLM is imported) and engine arguments."""
from __future__ import annotations

import os

MODES = ("vosti", "vosti-async", "default", "bi")


def prepare_environment(mode: str) -> None:
    """Call before importing vllm: BI mode is an environment switch."""
    if mode == "bi":
        os.environ["VLLM_BATCH_INVARIANT"] = "1"
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")   # apply_model across processes


def engine_kwargs(mode: str, backend: str | None = None) -> dict:
    """Engine arguments of a mode on top of the benchmark's own (model, lengths, memory)."""
    if mode.startswith("vosti"):
        return {"attention_backend": "vosti", "async_scheduling": mode == "vosti-async"}
    return {"attention_backend": backend} if backend else {}
