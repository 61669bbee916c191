"""The benchmark modes and what each sets: environment (before vLLM is imported) and engine arguments."""
from __future__ import annotations

import os

# vosti: vosti's defaults (async scheduling as vLLM decides: on where supported); vosti-sync / vosti-async pin it.
# vosti-tall: vosti's defaults with the tall GEMM path on (VOSTI_TALL_GEMM=1) for launches of 256+ rows.
# vosti-tma: vosti's defaults with tall launches through the TMA kernel (VOSTI_TMA_GEMM=1, the default).
# vosti-pointer: tall launches through the pointer kernels (VOSTI_TMA_GEMM=0).
# vosti-tma-groups: tall TMA launches one program a tile throughout, whole 2048-row chunks too
# (VOSTI_TMA_COLS_GEMM=0; by default those walk column tiles).
# vosti-nostretch: the split-KV workspace never grows past 2 GiB (VOSTI_SPLIT_WORKSPACE_SHARE=0), as before it could.
# vosti-step-grid: eager steps size the attention grid from the step's longest sequence (VOSTI_EAGER_STEP_GRID=1,
# the default); vosti-model-grid: every step's grid covers max_model_len (VOSTI_EAGER_STEP_GRID=0), as before.
# vosti-decode16: decode-only steps in 16-row attention tiles summing rows by tl.sum (VOSTI_DECODE_TILE_ROWS=16,
# VOSTI_ATTENTION_ROW_SUMS=sum), every geometry.
# vosti-dot16: the same tiles on the config's warps, every tile summing softmax rows by dot (VOSTI_ATTENTION_ROW_SUMS),
# every geometry (by default only 16-bit head dim 256 does); vosti-sum64: tl.sum's rows and decode in the prefill
# tiles, every geometry (VOSTI_ATTENTION_ROW_SUMS=sum, VOSTI_DECODE_TILE_ROWS=0).
# vosti-fused-prefill: steps of 512+ tokens with a prefill run fused in taller tiles (VOSTI_PREFILL_FUSED_FROM=512,
# every geometry; by default 16-bit geometries of up to 8 query heads a KV head); vosti-split-prefill: every step on
# the split path with the combine kernel (VOSTI_PREFILL_FUSED_FROM=0), as before that default.
# vosti-mid-gemm: GEMMs of 64 to 255 rows in 64-row tiles (VOSTI_MID_GEMM=1, the default); vosti-no-mid-gemm:
# in the decode tiles (VOSTI_MID_GEMM=0), as before.
# vosti-pdl: kernels launched with programmatic dependent launch (VOSTI_DEPENDENT_LAUNCH=1; off by default).
MODES = ("vosti", "vosti-sync", "vosti-async", "vosti-tall", "vosti-tma", "vosti-pointer", "vosti-tma-groups",
         "vosti-nostretch",
         "vosti-step-grid", "vosti-model-grid", "vosti-decode16", "vosti-dot16", "vosti-sum64", "vosti-fused-prefill",
         "vosti-split-prefill",
         "vosti-mid-gemm", "vosti-no-mid-gemm", "vosti-pdl", "default", "bi")
FUSED_PREFILL_FROM = "512"
_EAGER_STEP_GRID = {"vosti-step-grid": "1", "vosti-model-grid": "0"}
_ASYNC = {"vosti-sync": False, "vosti-async": True}
_MID_GEMM = {"vosti-mid-gemm": "1", "vosti-no-mid-gemm": "0"}
_ATTENTION_ROWS = {"vosti-decode16": ("16", "sum"), "vosti-dot16": ("16", "dot"), "vosti-sum64": ("0", "sum")}  # tiles, sums


def prepare_environment(mode: str) -> None:
    """Call before importing vllm: BI mode is an environment switch."""
    if mode == "bi":
        os.environ["VLLM_BATCH_INVARIANT"] = "1"
    if mode == "vosti-tall":
        os.environ["VOSTI_TALL_GEMM"] = "1"
    if mode == "vosti-tma":
        os.environ["VOSTI_TMA_GEMM"] = "1"
    if mode == "vosti-pointer":
        os.environ["VOSTI_TMA_GEMM"] = "0"
    if mode == "vosti-tma-groups":
        os.environ["VOSTI_TMA_COLS_GEMM"] = "0"
    if mode == "vosti-nostretch":
        os.environ["VOSTI_SPLIT_WORKSPACE_SHARE"] = "0"
    if mode in _ATTENTION_ROWS:
        os.environ["VOSTI_DECODE_TILE_ROWS"], os.environ["VOSTI_ATTENTION_ROW_SUMS"] = _ATTENTION_ROWS[mode]
    if mode == "vosti-fused-prefill":
        os.environ["VOSTI_PREFILL_FUSED_FROM"] = FUSED_PREFILL_FROM
    if mode == "vosti-split-prefill":
        os.environ["VOSTI_PREFILL_FUSED_FROM"] = "0"
    if mode in _MID_GEMM:
        os.environ["VOSTI_MID_GEMM"] = _MID_GEMM[mode]
    if mode == "vosti-pdl":
        os.environ["VOSTI_DEPENDENT_LAUNCH"] = "1"
    if mode in _EAGER_STEP_GRID:
        os.environ["VOSTI_EAGER_STEP_GRID"] = _EAGER_STEP_GRID[mode]
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")   # apply_model across processes


def engine_kwargs(mode: str, backend: str | None = None) -> dict:
    """Engine arguments of a mode on top of the benchmark's own (model, lengths, memory)."""
    if mode.startswith("vosti"):
        pinned = {"async_scheduling": _ASYNC[mode]} if mode in _ASYNC else {}
        return {"attention_backend": "vosti", **pinned}
    return {"attention_backend": backend} if backend else {}


def attention_impl_names(model) -> list[str]:
    """For LLM.apply_model (runs in the engine process): the attention implementations a model runs.
    Lives in an importable module so it pickles by reference."""
    return sorted({type(x.impl).__name__ for x in model.modules() if hasattr(x, "impl")})
