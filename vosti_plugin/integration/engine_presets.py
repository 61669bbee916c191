"""Settings that make vLLM start quickly and correctly here (CPU CI) and on a GPU, in one place."""
from __future__ import annotations

import os


# VOSTI_ENFORCE_EAGER=1: engines built here skip torch.compile (a CPU engine then starts in ~30 s instead of
# ~3 min). The test suite sets it; `vosti demo` and users keep vLLM's default (compiled).
EAGER_ENV = "VOSTI_ENFORCE_EAGER"


def has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def prepare_environment(in_process: bool = True) -> None:
    """Environment vLLM reads at import/start; call before importing vllm."""
    if not has_gpu():
        os.environ.setdefault("TRITON_INTERPRET", "1")   # before vLLM imports Triton
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")   # else 21 GiB is reserved and startup takes 86 s
    if in_process:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def bind_cpu_workers(tensor_parallel_size: int) -> None:
    """vLLM's CPU workers bind their threads to NUMA nodes and refuse to start with fewer nodes than
    workers; give each rank an equal share of this machine's cores instead (VLLM_CPU_OMP_THREADS_BIND)."""
    if tensor_parallel_size <= 1 or has_gpu() or os.environ.get("VLLM_CPU_OMP_THREADS_BIND"):
        return
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    share = max(1, len(cores) // tensor_parallel_size)
    ranks = [cores[r * share:(r + 1) * share] or cores[-1:] for r in range(tensor_parallel_size)]
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(",".join(map(str, r)) for r in ranks)


def llm_kwargs(model: str, *, vosti: bool = True, **overrides) -> dict:
    gpu = has_gpu()
    kw = dict(
        model=model,
        dtype="float32",   # the bundled model is fp32; on CPU the Triton interpreter is exact only in fp32
        max_model_len=1024,
        # CPU: the stock backend needs pages that are a multiple of 32; the same size for both modes keeps
        # comparisons like for like. GPU: vosti picks its own default (64), stock vLLM its own.
        block_size=None if gpu else 32,
        seed=0,
        logprobs_mode="raw_logits",
        enable_prefix_caching=True,
    )
    if vosti:
        kw["attention_backend"] = "vosti"
    if gpu:
        kw["gpu_memory_utilization"] = 0.5
    if os.environ.get(EAGER_ENV) == "1":
        kw["enforce_eager"] = True
    kw.update(overrides)
    return kw


def build_llm(model: str, *, vosti: bool = True, **overrides):
    prepare_environment()
    bind_cpu_workers(int(overrides.get("tensor_parallel_size", 1)))
    from vosti_plugin.vllm import engine

    return engine.llm(**llm_kwargs(model, vosti=vosti, **overrides))
