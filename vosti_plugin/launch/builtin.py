"""vosti's own launch obligations (registered as a pluggy plugin)."""
from __future__ import annotations

import z3

from vosti_plugin.launch.facts import LaunchFacts
from vosti_plugin.launch.hookspecs import hookimpl
from vosti_plugin.launch.obligations import Obligation

INT32_MAX = 2**31 - 1
SUPPORTED_DTYPES_BY_PLATFORM = {
    "cpu": {"float32"},               # bf16/fp16 through the Triton interpreter are broken
    "cuda": {"float32", "float16", "bfloat16"},
}


def _prove(claim, *constraints) -> bool:
    solver = z3.Solver()
    solver.add(*constraints)
    solver.add(z3.Not(claim))
    return solver.check() == z3.unsat


def _attention_config(f: LaunchFacts):
    import torch

    from vosti_plugin.attention.config import select_config

    return select_config(f.head_size, f.num_q_heads, f.num_kv_heads, f.page_size, getattr(torch, f.dtype))


def _attention_geometry(f: LaunchFacts):
    try:
        _attention_config(f)
    except ValueError as exc:
        return str(exc)
    return None


def _page_multiple_of_tile(f: LaunchFacts):
    cfg = _attention_config(f)
    page, tile = z3.Int("page_size"), z3.Int("block_n")
    if not _prove(page % tile == 0, page == f.page_size, tile == cfg.block_n):
        return f"page size {f.page_size} is not a multiple of the attention KV tile {cfg.block_n}"
    return None


def _slot_index_fits_int32(f: LaunchFacts):
    """For every page id below the number of pages and every offset in a page, the slot index and the
    element offsets the kernels form stay inside int32."""
    blocks = f.num_gpu_blocks
    if blocks is None:
        # Before profiling the cache size is unknown; bound it by the most pages max_model_len * seqs needs.
        blocks = (f.max_model_len // f.page_size + 1) * f.max_num_seqs
    b, o = z3.Ints("block offset")
    page = f.page_size
    row_elems = f.num_kv_heads * f.head_size * 2
    ok = _prove(
        (b * page + o) * row_elems + row_elems <= INT32_MAX * 2**32,  # kernels use int64 for cache offsets
        b >= 0, b < blocks, o >= 0, o < page,
    ) and _prove(b * page + o <= INT32_MAX, b >= 0, b < blocks, o >= 0, o < page)
    return None if ok else f"slot indices exceed int32 with {blocks} pages of {page}"


def _token_offsets_fit_int32(f: LaunchFacts):
    t, h, d = z3.Ints("token head dim")
    ok = _prove(
        (t * f.num_q_heads + h) * f.head_size + d <= INT32_MAX,
        t >= 0, t < f.max_num_batched_tokens, h >= 0, h < f.num_q_heads, d >= 0, d < f.head_size,
    )
    return None if ok else "query/output element offsets for a full batch exceed int32"


def _dtype(f: LaunchFacts):
    allowed = SUPPORTED_DTYPES_BY_PLATFORM.get(f.platform, set())
    if f.dtype not in allowed:
        return f"dtype {f.dtype} on {f.platform} is not covered (supported: {sorted(allowed) or 'none'})"
    return None


def _refuse(flag: str, what: str):
    return lambda f: (f"{what} is enabled" if getattr(f, flag) else None)


def _single_device(f: LaunchFacts):
    if f.tensor_parallel * f.pipeline_parallel * f.data_parallel != 1:
        return (f"tensor/pipeline/data parallel sizes {f.tensor_parallel}/{f.pipeline_parallel}/"
                f"{f.data_parallel}: collectives are not covered by a contract")
    return None


def _scheduler(f: LaunchFacts):
    from vllm.utils.import_utils import resolve_obj_by_qualname

    from vosti_plugin.scheduler import VostiScheduler

    try:
        cls = resolve_obj_by_qualname(f.scheduler_cls) if f.scheduler_cls else None
    except Exception as exc:
        return f"scheduler {f.scheduler_cls!r} cannot be imported: {exc}"
    if cls is None or not (isinstance(cls, type) and issubclass(cls, VostiScheduler)):
        return f"scheduler {f.scheduler_cls or 'default'} is not vosti's (its prefix cache can serve unchecked hits)"
    return None


def _async_scheduler(f: LaunchFacts):
    """Under async scheduling a step is scheduled before the previous step's tokens exist; only vosti's
    async scheduler holds back the pages those placeholder tokens fill until the tokens are known."""
    if not f.async_scheduling:
        return None
    from vllm.utils.import_utils import resolve_obj_by_qualname

    from vosti_plugin.scheduler import VostiAsyncScheduler, VostiScheduler

    try:
        cls = resolve_obj_by_qualname(f.scheduler_cls) if f.scheduler_cls else None
    except Exception:
        return None                      # reported by vosti-scheduler
    # VostiScheduler itself constructs a VostiAsyncScheduler under async scheduling; its subclasses do not.
    if not (cls is VostiScheduler or (isinstance(cls, type) and issubclass(cls, VostiAsyncScheduler))):
        return f"async scheduling with {f.scheduler_cls or 'the default scheduler'}, not VostiAsyncScheduler"
    return None


def _kv_cache_dtype(f: LaunchFacts):
    return None if f.kv_cache_dtype == "auto" else f"KV cache dtype {f.kv_cache_dtype} (quantized KV) is not covered"


def _quantization(f: LaunchFacts):
    return None if not f.quantization else f"weight quantization {f.quantization} has no invariant GEMM here"


def _kernel_configs_verified(f: LaunchFacts):
    from vosti_plugin.launch.verified import unverified_configs

    missing = unverified_configs(f)
    return ("not proved by the verifier: " + "; ".join(missing)) if missing else None


BUILTIN_OBLIGATIONS = (
    Obligation("attention-geometry", "head size, GQA ratio, page size and dtype are in the kernel catalog",
               "use a supported head size (64/128/256; 32 on CPU) and a page size that is a multiple of 16",
               _attention_geometry),
    Obligation("page-multiple-of-tile", "page size is a multiple of the attention KV tile",
               "pass --block-size 16, 32 or 64", _page_multiple_of_tile),
    Obligation("dtype", "model dtype is covered on this platform",
               "CPU: --dtype float32; GPU: float16/bfloat16/float32", _dtype),
    Obligation("kv-cache-dtype", "KV cache is unquantized", "drop --kv-cache-dtype", _kv_cache_dtype),
    Obligation("slot-index-int32", "slot indices fit int32 for every page id and offset",
               "use fewer KV pages (lower --gpu-memory-utilization)", _slot_index_fits_int32),
    Obligation("token-offset-int32", "query element offsets fit int32 for every batch",
               "lower --max-num-batched-tokens", _token_offsets_fit_int32),
    Obligation("no-speculative-decoding", "speculative decoding is off",
               "remove --speculative-config", _refuse("speculative", "speculative decoding")),
    Obligation("async-scheduler", "async scheduling, when on, runs vosti's async scheduler",
               "drop --scheduler-cls or pass a subclass of vosti_plugin.scheduler.VostiAsyncScheduler",
               _async_scheduler),
    Obligation("no-cascade-attention", "cascade attention is off",
               "vosti turns it off; do not force it on", _refuse("cascade_attention", "cascade attention")),
    Obligation("no-lora", "LoRA is off", "remove --enable-lora", _refuse("lora", "LoRA")),
    Obligation("no-kv-transfer", "no KV connector", "remove --kv-transfer-config", _refuse("kv_transfer", "KV transfer")),
    Obligation("single-device", "one device (no TP/PP/DP)", "use tensor/pipeline/data parallel size 1", _single_device),
    Obligation("no-weight-quantization", "weights unquantized", "serve an unquantized checkpoint", _quantization),
    Obligation("no-autotuning", "no runtime autotuning in any launched kernel", "none (vosti never autotunes)",
               _refuse("autotune", "runtime autotuning")),
    Obligation("vosti-scheduler", "the scheduler is vosti's (exact-prefix cache)",
               "drop --scheduler-cls or pass a subclass of vosti_plugin.scheduler.VostiScheduler", _scheduler),
    Obligation("kernel-configs-verified", "every kernel config this geometry launches is proved by the verifier",
               "run `vosti verify` to see the failing contract", _kernel_configs_verified),
)


class BuiltinRules:
    @hookimpl
    def vosti_launch_obligations(self, facts):
        return BUILTIN_OBLIGATIONS
