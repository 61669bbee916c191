"""vosti's own launch obligations (registered as a pluggy plugin)."""
from __future__ import annotations

import z3

from vosti_plugin.launch.facts import LaunchFacts
from vosti_plugin.launch.hookspecs import hookimpl
from vosti_plugin.launch.obligations import NOT_SUPPORTED_YET, Obligation, Refusal

INT32_MAX = 2**31 - 1
VOSTI_SCHEDULER = "vosti_plugin.scheduler.VostiScheduler"   # what vosti sets unless --scheduler-cls is given
SUPPORTED_DTYPES_BY_PLATFORM = {
    "cpu": {"float32"},               # bf16/fp16 through the Triton interpreter are broken
    "cuda": {"float32", "float16", "bfloat16"},
}


def _prove(claim, *constraints) -> bool:
    solver = z3.Solver()
    solver.add(*constraints)
    solver.add(z3.Not(claim))
    return solver.check() == z3.unsat


PREFERRED_DTYPE = {"cpu": "float32", "cuda": "bfloat16"}
WHY_DTYPES = {"cpu": "Triton's interpreter is exact only in float32 (its bfloat16/float16 arithmetic is broken)"}


def _dtype(f: LaunchFacts):
    allowed = SUPPORTED_DTYPES_BY_PLATFORM.get(f.platform, set())
    if f.dtype in allowed:
        return None
    if not allowed:
        return Refusal(f"platform {f.platform!r} has no vosti kernels",
                       fix="none: vosti runs on CUDA GPUs and on CPU (through Triton's interpreter)")
    why = WHY_DTYPES.get(f.platform, f"the kernel catalog covers {', '.join(sorted(allowed))} there")
    to = PREFERRED_DTYPE[f.platform]
    return Refusal(f"dtype {f.dtype} is not covered on {f.platform}: {why}",
                   fix=f"pass --dtype {to}", fix_args=("--dtype", to), fixed={"dtype": to})


def _spans(values) -> str:
    """1, 2, 3, 4, 8 -> '1-4, 8'."""
    out, run = [], [values[0]]
    for v in values[1:]:
        if v == run[-1] + 1:
            run.append(v)
        else:
            out.append(run)
            run = [v]
    out.append(run)
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in out)


def _attention_geometry(f: LaunchFacts):
    """What the model itself fixes (head size, query heads per KV head): no launch argument changes it."""
    from vosti_plugin.attention.config import SUPPORTED_HEAD_DIMS, SUPPORTED_QUERIES_PER_KV

    problems, covered = [], []
    if f.head_size not in SUPPORTED_HEAD_DIMS:
        problems.append(f"head size {f.head_size}")
        covered.append(f"head sizes {_spans(SUPPORTED_HEAD_DIMS)}")
    if f.num_kv_heads < 1 or f.num_q_heads % f.num_kv_heads:
        problems.append(f"{f.num_q_heads} query heads over {f.num_kv_heads} KV heads (not a whole GQA group)")
        covered.append("query heads a multiple of KV heads")
    elif f.num_q_heads // f.num_kv_heads not in SUPPORTED_QUERIES_PER_KV:
        problems.append(f"{f.num_q_heads // f.num_kv_heads} query heads per KV head ({f.num_q_heads}/{f.num_kv_heads})")
        covered.append(f"{_spans(SUPPORTED_QUERIES_PER_KV)} query heads per KV head")
    if not problems:
        return None
    what = " and ".join(problems)
    return Refusal(f"{what}: the attention kernels cover {'; '.join(covered)}", fix=NOT_SUPPORTED_YET + what)


def _attention_config(f: LaunchFacts, page_size: int | None = None):
    import torch

    from vosti_plugin.attention.config import select_config

    page = f.page_size if page_size is None else page_size
    return select_config(f.head_size, f.num_q_heads, f.num_kv_heads, page, getattr(torch, f.dtype))


def _fits_tile(f: LaunchFacts, page_size: int) -> bool:
    page, tile = z3.Int("page_size"), z3.Int("block_n")
    return _prove(page % tile == 0, page == page_size, tile == _attention_config(f, page_size).block_n)


def _page_size(f: LaunchFacts):
    """The page size is one the attention kernel is built for and a whole number of its KV tiles."""
    from vosti_plugin.attention.config import SUPPORTED_PAGE_SIZES

    good = [p for p in SUPPORTED_PAGE_SIZES if _fits_tile(f, p)]
    if f.page_size in good:
        return None
    if f.page_size in SUPPORTED_PAGE_SIZES:
        why = (f"page size {f.page_size} is not a multiple of the attention KV tile "
               f"{_attention_config(f).block_n} ({f.dtype}, head size {f.head_size})")
    else:
        why = f"page size {f.page_size} is not one the attention kernel is built for"
    if not good:
        return Refusal(why, fix=NOT_SUPPORTED_YET + f"no page size the attention kernel is built for "
                                f"({', '.join(map(str, SUPPORTED_PAGE_SIZES))}) is a whole number of its KV tiles")
    to = next((p for p in good if p >= f.page_size), good[-1])
    others = [str(p) for p in good if p != to]
    return Refusal(why, fix=f"pass --block-size {to}" + (f" (or {' or '.join(others)})" if others else ""),
                   fix_args=("--block-size", str(to)), fixed={"page_size": to})


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
    if ok:
        return None
    most = (INT32_MAX + 1) // page
    return Refusal(f"slot indices exceed int32 with {blocks} pages of {page}",
                   fix=f"pass --num-gpu-blocks-override {most} (at most {most} pages of {page} fit int32)",
                   fix_args=("--num-gpu-blocks-override", str(most)), fixed={"num_gpu_blocks": most})


def _token_offsets_fit_int32(f: LaunchFacts):
    t, h, d = z3.Ints("token head dim")
    ok = _prove(
        (t * f.num_q_heads + h) * f.head_size + d <= INT32_MAX,
        t >= 0, t < f.max_num_batched_tokens, h >= 0, h < f.num_q_heads, d >= 0, d < f.head_size,
    )
    if ok:
        return None
    most = (INT32_MAX + 1) // (f.num_q_heads * f.head_size)
    return Refusal(f"query/output element offsets of {f.max_num_batched_tokens} batched tokens exceed int32",
                   fix=f"pass --max-num-batched-tokens {most} or fewer",
                   fix_args=("--max-num-batched-tokens", str(most)), fixed={"max_num_batched_tokens": most})


def _refuse(flag: str, what: str):
    return lambda f: (f"{what} is enabled" if getattr(f, flag) else None)


def _autotuning(f: LaunchFacts):
    """Filled from the kernels vosti launches (vosti_plugin.launch.autotuning)."""
    if not f.autotune:
        return None
    names = (f.extra or {}).get("autotuned_kernels") or ["a launched kernel"]
    return f"runtime autotuning in {', '.join(names)}: its config (and a row's arithmetic) depends on timing"


def _pipeline_or_data_parallel(f: LaunchFacts):
    if f.pipeline_parallel != 1 or f.data_parallel != 1:
        return (f"pipeline/data parallel sizes {f.pipeline_parallel}/{f.data_parallel}: stage hand-offs and "
                f"replicas sharing a prefix cache are not covered (tensor parallelism is)")
    return None


def _tp_collectives(f: LaunchFacts):
    from vosti_plugin.parallel.fixed_order import COLLECTIVE

    if f.tensor_parallel == 1:
        return None
    if f.tp_collective != COLLECTIVE:
        return (f"tensor parallel size {f.tensor_parallel} with {f.tp_collective or 'an unknown all-reduce'}: "
                f"its summation order depends on the message size, i.e. on the batch")
    if f.collective_passes:
        return (f"compile passes {', '.join(f.collective_passes)} replace the TP all-reduce with a fused "
                f"collective whose summation order vosti does not fix")
    return None


def _scheduler(f: LaunchFacts):
    from vosti_plugin.vllm.launch_facts import resolve_qualname

    from vosti_plugin.scheduler import VostiScheduler

    try:
        cls = resolve_qualname(f.scheduler_cls) if f.scheduler_cls else None
    except Exception as exc:
        return Refusal(f"scheduler {f.scheduler_cls!r} cannot be imported: {exc}",
                       fixed={"scheduler_cls": VOSTI_SCHEDULER})
    if cls is None or not (isinstance(cls, type) and issubclass(cls, VostiScheduler)):
        return Refusal(f"scheduler {f.scheduler_cls or 'default'} is not vosti's (its prefix cache can serve "
                       "unchecked hits)", fixed={"scheduler_cls": VOSTI_SCHEDULER})
    return None


def _async_scheduler(f: LaunchFacts):
    """Under async scheduling a step is scheduled before the previous step's tokens exist; only vosti's
    async scheduler holds back the pages those placeholder tokens fill until the tokens are known."""
    if not f.async_scheduling:
        return None
    from vosti_plugin.vllm.launch_facts import resolve_qualname

    from vosti_plugin.scheduler import VostiAsyncScheduler, VostiScheduler

    try:
        cls = resolve_qualname(f.scheduler_cls) if f.scheduler_cls else None
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


def _multimodal_inputs(f: LaunchFacts):
    if not f.multimodal_inputs:
        return None
    return Refusal(f"{f.architecture or 'the model'} takes multimodal inputs: its encoder tower and the "
                   "bidirectional attention over image tokens are outside vosti's kernels and proofs "
                   "(vosti proves the text decoder)",
                   fix="pass --language-model-only: vLLM then builds no encoder tower and serves the text path "
                       "(--limit-mm-per-prompt with 0 for every modality does the same)",
                   fix_args=("--language-model-only",),
                   fixed={"multimodal_inputs": False,
                          **({"prefix_lm_attention": False} if f.text_tower_loader else {})})


def _prefix_lm_attention(f: LaunchFacts):
    if not f.prefix_lm_attention:
        return None
    return Refusal(f"{f.architecture or 'the model'} builds its attention layers for a multimodal prefix LM "
                   "(bidirectional attention over image-token spans), a mask vosti's attention kernel does not "
                   "implement (vLLM would refuse to pair those layers with the vosti backend)",
                   fix=NOT_SUPPORTED_YET + "vosti has no text-tower loader for this architecture: serve a "
                       "text-only checkpoint of the model")


def _kernel_configs_verified(f: LaunchFacts):
    from vosti_plugin.launch.verified import unproved_launches

    missing = unproved_launches(f)
    if not missing:
        return None
    outside = [m.label() for m in missing if not m.in_catalog]
    failed = [m.label() for m in missing if m.in_catalog]
    if failed:
        families = sorted({m.kernel.split("/")[0] for m in missing if m.in_catalog})
        return Refusal("the verifier did not prove: " + "; ".join(failed + outside),
                       fix=f"run `vosti verify --kernel {families[0]}` to see the failing contract (the "
                           "kernel sources or the verifier changed since the catalog was last proved)")
    layers = ", ".join(m.kernel for m in missing)
    return Refusal("launches kernel configs outside the verified catalog: " + "; ".join(outside),
                   fix=NOT_SUPPORTED_YET + f"{layers} in {f.dtype} launch kernel configs outside the verified "
                       "catalog (`vosti verify --all` lists the proved ones)")


# Order matters: an obligation comes after those named in its `after` (see obligations.evaluate_all).
BUILTIN_OBLIGATIONS = (
    Obligation("dtype", "model dtype is covered on this platform",
               "CPU: --dtype float32; GPU: --dtype bfloat16, float16 or float32", _dtype),
    Obligation("attention-geometry", "head size and query heads per KV head are in the kernel catalog",
               NOT_SUPPORTED_YET + "see the README's Supported table", _attention_geometry),
    Obligation("page-size", "page size is one the attention kernel is built for, a multiple of its KV tile",
               "pass --block-size 64", _page_size, after=("dtype", "attention-geometry")),
    Obligation("kv-cache-dtype", "KV cache is unquantized", "drop --kv-cache-dtype", _kv_cache_dtype),
    Obligation("slot-index-int32", "slot indices fit int32 for every page id and offset",
               "use fewer KV pages (lower --gpu-memory-utilization)", _slot_index_fits_int32,
               after=("page-size",)),
    Obligation("token-offset-int32", "query element offsets fit int32 for every batch",
               "lower --max-num-batched-tokens", _token_offsets_fit_int32),
    Obligation("no-speculative-decoding", "speculative decoding is off",
               "remove --speculative-config", _refuse("speculative", "speculative decoding")),
    Obligation("vosti-scheduler", "the scheduler is vosti's (exact-prefix cache)",
               "drop --scheduler-cls or pass a subclass of vosti_plugin.scheduler.VostiScheduler", _scheduler),
    Obligation("async-scheduler", "async scheduling, when on, runs vosti's async scheduler",
               "drop --scheduler-cls or pass a subclass of vosti_plugin.scheduler.VostiAsyncScheduler",
               _async_scheduler, after=("vosti-scheduler",)),
    Obligation("no-cascade-attention", "cascade attention is off",
               "vosti turns it off; do not force it on", _refuse("cascade_attention", "cascade attention")),
    Obligation("text-only-inputs", "no multimodal inputs (the text path is what vosti proves)",
               "pass --language-model-only", _multimodal_inputs),
    Obligation("causal-text-attention", "attention layers are causal text attention (no multimodal prefix LM)",
               "serve a text-only checkpoint", _prefix_lm_attention, after=("text-only-inputs",)),
    Obligation("no-lora", "LoRA is off", "remove --enable-lora", _refuse("lora", "LoRA")),
    Obligation("no-kv-transfer", "no KV connector", "remove --kv-transfer-config", _refuse("kv_transfer", "KV transfer")),
    Obligation("no-pipeline-or-data-parallel", "pipeline and data parallel sizes are 1",
               "use --pipeline-parallel-size 1 and --data-parallel-size 1 (tensor parallelism is supported)",
               _pipeline_or_data_parallel),
    Obligation("tp-collectives", "tensor-parallel all-reduces run in a fixed rank order",
               "turn the listed passes off in --compilation-config (e.g. '{\"pass_config\": "
               "{\"fuse_allreduce_rms\": false}}')", _tp_collectives),
    Obligation("no-weight-quantization", "weights unquantized", "serve an unquantized checkpoint", _quantization),
    Obligation("no-autotuning", "no runtime autotuning in any launched kernel",
               "pin the kernel to one triton.Config without pruning hooks", _autotuning),
    Obligation("kernel-configs-verified", "every kernel config this geometry launches is proved by the verifier",
               "run `vosti verify` to see the failing contract", _kernel_configs_verified,
               after=("dtype", "attention-geometry", "page-size")),
)


class BuiltinRules:
    @hookimpl
    def vosti_launch_obligations(self, facts):
        return BUILTIN_OBLIGATIONS
