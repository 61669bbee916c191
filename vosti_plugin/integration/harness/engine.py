"""Engine modes and the few handles on a running in-process vLLM engine that the harness needs.

A mode is stock vLLM or vLLM + vosti, set up before vLLM starts (env vars are read at import), so
each mode runs in its own process. `token_budget` and `StepRecorder` reach the engine-core
scheduler, which exists in-process only (VLLM_ENABLE_V1_MULTIPROCESSING=0, set by
engine_presets.prepare_environment); the attribute path is the same in vLLM 0.26 and 0.32.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

from vosti_plugin.integration.engine_presets import bind_cpu_workers, has_gpu, llm_kwargs, prepare_environment

from vosti_plugin.integration.harness.models import ModelSpec
from vosti_plugin.integration.harness.scale import Scale


@dataclass(frozen=True)
class Mode:
    name: str
    label: str
    vosti: bool = False
    env: dict = field(default_factory=dict)
    attention_backend: str | None = None
    gpu_only: bool = False
    engine: dict = field(default_factory=dict)     # extra engine arguments


_TP2 = {"tensor_parallel_size": 2, "distributed_executor_backend": "mp"}
MODES: dict[str, Mode] = {
    "vosti": Mode("vosti", "vLLM + vosti", vosti=True),     # async scheduling as vLLM decides (on, on a GPU)
    "vosti-sync": Mode("vosti-sync", "vLLM + vosti, sync scheduling", vosti=True,
                       engine={"async_scheduling": False}),
    "vosti-async": Mode("vosti-async", "vLLM + vosti, async scheduling", vosti=True, gpu_only=True,
                        engine={"async_scheduling": True}),
    "vosti-tall": Mode("vosti-tall", "vLLM + vosti, tall GEMM path", vosti=True, gpu_only=True,
                       env={"VOSTI_TALL_GEMM": "1"}),
    "vosti-step-grid": Mode("vosti-step-grid", "vLLM + vosti, eager steps' grid from the step", vosti=True,
                            env={"VOSTI_EAGER_STEP_GRID": "1"}),
    "vosti-model-grid": Mode("vosti-model-grid", "vLLM + vosti, every step's grid for max_model_len", vosti=True,
                             env={"VOSTI_EAGER_STEP_GRID": "0"}),
    "vosti-decode16": Mode("vosti-decode16", "vLLM + vosti, decode steps in 16-row attention tiles", vosti=True,
                           env={"VOSTI_DECODE_TILE_ROWS": "16", "VOSTI_ATTENTION_ROW_SUMS": "sum"}),
    "vosti-dot16": Mode("vosti-dot16", "vLLM + vosti, row sums by dot, decode steps in 16-row tiles", vosti=True,
                        env={"VOSTI_DECODE_TILE_ROWS": "16", "VOSTI_ATTENTION_ROW_SUMS": "dot"}),
    "vosti-sum64": Mode("vosti-sum64", "vLLM + vosti, row sums by tl.sum, decode steps in the prefill tiles",
                        vosti=True, env={"VOSTI_DECODE_TILE_ROWS": "0", "VOSTI_ATTENTION_ROW_SUMS": "sum"}),
    # every step of 2+ tokens with a prefill fused in taller tiles, the rest split: the classes compare rows of both
    "vosti-fused-prefill": Mode("vosti-fused-prefill", "vLLM + vosti, prefill steps fused in taller tiles", vosti=True,
                                env={"VOSTI_PREFILL_FUSED_FROM": "2"}),
    # every step split, the combine kernel folding (the default's other path, as before it)
    "vosti-split-prefill": Mode("vosti-split-prefill", "vLLM + vosti, every step split", vosti=True,
                                env={"VOSTI_PREFILL_FUSED_FROM": "0"}),
    "vosti-mid-gemm": Mode("vosti-mid-gemm", "vLLM + vosti, GEMMs of 64-255 rows in 64-row tiles", vosti=True,
                           env={"VOSTI_MID_GEMM": "1"}),
    "vosti-no-mid-gemm": Mode("vosti-no-mid-gemm", "vLLM + vosti, GEMMs below 256 rows in the decode tiles",
                              vosti=True, env={"VOSTI_MID_GEMM": "0"}),
    "default": Mode("default", "vLLM default"),
    # tensor parallel size 2: on CPU two worker processes over gloo/shm (vosti: all-gather + rank-order sum)
    "vosti-tp2": Mode("vosti-tp2", "vLLM + vosti, TP 2", vosti=True, engine=dict(_TP2)),
    "default-tp2": Mode("default-tp2", "vLLM default, TP 2", engine=dict(_TP2)),
    "bi-flash": Mode("bi-flash", "vLLM BI, FLASH_ATTN", env={"VLLM_BATCH_INVARIANT": "1"},
                     attention_backend="FLASH_ATTN", gpu_only=True),
    "bi-triton": Mode("bi-triton", "vLLM BI, TRITON_ATTN", env={"VLLM_BATCH_INVARIANT": "1"},
                      attention_backend="TRITON_ATTN", gpu_only=True),
}
CPU_MODES = ("vosti", "default", "bi-flash", "bi-triton")   # BI modes are reported as unavailable there
GPU_MODES = ("vosti", "default", "bi-flash", "bi-triton")


def get_mode(name: str) -> Mode:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown mode {name!r}; known: {', '.join(MODES)}") from None


def unavailable_reason(mode: Mode) -> str | None:
    if mode.gpu_only and not has_gpu():
        if mode.engine.get("async_scheduling"):
            return "needs a CUDA GPU: vLLM's CPU platform turns async scheduling off"
        if mode.env.get("VOSTI_TALL_GEMM"):
            return "needs a CUDA GPU: the tall GEMM path is for 16-bit GEMMs on Triton's GPU backend"
        return "needs a CUDA GPU: VLLM_BATCH_INVARIANT=1 crashes on vLLM's CPU platform"
    return None


def prepare(mode: Mode) -> None:
    """Environment for this mode; call before importing vllm."""
    prepare_environment(in_process=True)
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")   # apply_model re-draws weights
    for key, value in mode.env.items():
        os.environ[key] = value
    if not mode.env.get("VLLM_BATCH_INVARIANT"):
        os.environ.pop("VLLM_BATCH_INVARIANT", None)
    bind_cpu_workers(int(mode.engine.get("tensor_parallel_size", 1)))


def engine_kwargs(mode: Mode, spec: ModelSpec, model_path: str, scale: Scale, eager: bool = False) -> dict:
    overrides = dict(
        skip_tokenizer_init=True,
        max_model_len=min(scale.max_model_len, spec.max_positions),
        max_num_batched_tokens=scale.max_num_batched_tokens,
        max_logprobs=max(20, scale.top_k),
    )
    if has_gpu():
        overrides["dtype"] = "bfloat16"
        overrides["gpu_memory_utilization"] = float(os.environ.get("VOSTI_HARNESS_GPU_MEM", "0.6"))
        if os.environ.get("VOSTI_HARNESS_KV_GIB"):   # fixed KV size: no memory profiling against neighbours
            overrides["kv_cache_memory_bytes"] = int(float(os.environ["VOSTI_HARNESS_KV_GIB"]) * 2**30)
    if spec.dummy:
        overrides["load_format"] = "dummy"
    if mode.attention_backend:
        overrides["attention_backend"] = mode.attention_backend
    if eager:
        overrides["enforce_eager"] = True
    overrides.update(mode.engine)
    kw = llm_kwargs(model_path, vosti=mode.vosti, **overrides)
    if has_gpu():
        if mode.vosti:
            kw.pop("block_size", None)    # vosti picks a page size that is a multiple of its KV tiles
    else:
        kw["block_size"] = 32             # stock CPU attention needs multiples of 32; vosti's CPU tile is 32
    return kw


def build(mode: Mode, spec: ModelSpec, model_path: str, scale: Scale, eager: bool = False):
    prepare(mode)
    from vllm import LLM

    return LLM(**engine_kwargs(mode, spec, model_path, scale, eager))


def scheduler(llm):
    core = getattr(llm.llm_engine.engine_core, "engine_core", None)
    if core is None:
        raise RuntimeError("the harness needs vLLM's engine core in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0)")
    return core.scheduler


def engine_facts(llm) -> dict:
    cfg = llm.llm_engine.vllm_config
    sched = scheduler(llm)
    return {
        "block_size": cfg.cache_config.block_size,
        "dtype": str(cfg.model_config.dtype),
        "max_num_batched_tokens": cfg.scheduler_config.max_num_batched_tokens,
        "max_model_len": cfg.model_config.max_model_len,
        "prefix_caching": bool(cfg.cache_config.enable_prefix_caching),
        "scheduler": type(sched).__module__ + "." + type(sched).__qualname__,
        "async_scheduling": bool(getattr(cfg.scheduler_config, "async_scheduling", False)),
        "enforce_eager": bool(cfg.model_config.enforce_eager),
        "attention_backend": str(getattr(getattr(cfg, "attention_config", None), "backend", None)),
    }


@contextlib.contextmanager
def token_budget(llm, tokens: int):
    """Schedule at most `tokens` tokens per step (a smaller chunked-prefill budget) inside the block."""
    sched = scheduler(llm)
    ceiling = llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens
    if tokens > ceiling:
        raise ValueError(f"budget {tokens} exceeds the engine's max_num_batched_tokens {ceiling}")
    before = sched.max_num_scheduled_tokens
    sched.max_num_scheduled_tokens = tokens
    try:
        yield
    finally:
        sched.max_num_scheduled_tokens = before


class StepRecorder:
    """Records, per engine step, how many tokens each request was scheduled (its chunks and company)."""

    def __init__(self, llm) -> None:
        self._sched = scheduler(llm)
        self.steps: list[dict[str, int]] = []
        stock = self._sched.schedule

        def schedule(*args, **kwargs):
            out = stock(*args, **kwargs)
            if out.num_scheduled_tokens:
                self.steps.append(dict(out.num_scheduled_tokens))
            return out

        self._stock = stock
        self._sched.schedule = schedule

    def close(self) -> None:
        self._sched.schedule = self._stock

    def clear(self) -> None:
        self.steps.clear()

    @staticmethod
    def _matches(core_id: str, request_id: str) -> bool:
        return core_id == request_id or core_id.startswith(request_id + "-")

    def chunks(self, request_id: str) -> list[int]:
        """Tokens scheduled for this request in each step it ran."""
        return [n for step in self.steps for rid, n in step.items() if self._matches(rid, request_id)]

    def max_company(self, request_id: str) -> int:
        """Most other requests scheduled in one step together with this one."""
        return max((len(step) - 1 for step in self.steps
                    if any(self._matches(rid, request_id) for rid in step)), default=0)
