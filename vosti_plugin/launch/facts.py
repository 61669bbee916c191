"""What a launch check looks at, extracted from vLLM's config into plain data."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LaunchFacts:
    model: str
    architecture: str
    dtype: str                      # "float32" | "float16" | "bfloat16" | other
    head_size: int
    num_q_heads: int
    num_kv_heads: int
    num_layers: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    sliding_window: int | None
    page_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    num_gpu_blocks: int | None
    platform: str                   # "cpu" | "cuda" | ...
    kv_cache_dtype: str = "auto"
    scheduler_cls: str = ""         # as configured
    scheduler_built: str = ""       # what the engine constructs (VostiScheduler picks its async subclass)
    async_scheduling: bool = False
    cascade_attention: bool = False
    speculative: bool = False
    lora: bool = False
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    kv_transfer: bool = False
    quantization: str | None = None
    autotune: bool = False
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _name(x) -> str:
    if x is None:
        return ""
    if isinstance(x, str):
        return x
    return f"{x.__module__}.{x.__qualname__}"


def _built_scheduler(configured: str, async_scheduling: bool) -> str:
    if not configured:
        return ""
    try:
        from vllm.utils.import_utils import resolve_obj_by_qualname

        cls = resolve_obj_by_qualname(configured)
    except Exception:   # reported by the scheduler obligation
        return configured
    class_built = getattr(cls, "class_built", None)
    return _name(class_built(async_scheduling)) if class_built else configured


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def facts_from_vllm_config(vllm_config) -> LaunchFacts:
    mc = vllm_config.model_config
    cc = vllm_config.cache_config
    sc = vllm_config.scheduler_config
    pc = vllm_config.parallel_config
    hf = mc.hf_text_config
    from vllm.platforms import current_platform

    window = getattr(hf, "sliding_window", None)
    if getattr(hf, "use_sliding_window", True) is False:
        window = None
    return LaunchFacts(
        model=str(mc.model),
        architecture=",".join(getattr(mc.hf_config, "architectures", None) or []),
        dtype=_dtype_name(mc.dtype),
        head_size=mc.get_head_size(),
        num_q_heads=mc.get_num_attention_heads(pc),
        num_kv_heads=mc.get_num_kv_heads(pc),
        num_layers=mc.get_num_layers(pc),
        hidden_size=mc.get_hidden_size(),
        intermediate_size=int(getattr(hf, "intermediate_size", 0) or 0),
        vocab_size=mc.get_vocab_size(),
        sliding_window=window,
        page_size=cc.block_size,
        max_model_len=mc.max_model_len,
        max_num_batched_tokens=sc.max_num_batched_tokens,
        max_num_seqs=sc.max_num_seqs,
        num_gpu_blocks=getattr(cc, "num_gpu_blocks", None),
        platform=current_platform.device_type,
        kv_cache_dtype=str(cc.cache_dtype),
        scheduler_cls=_name(sc.scheduler_cls),
        scheduler_built=_built_scheduler(_name(sc.scheduler_cls), bool(sc.async_scheduling)),
        async_scheduling=bool(sc.async_scheduling),
        cascade_attention=not bool(getattr(mc, "disable_cascade_attn", True)),
        speculative=vllm_config.speculative_config is not None,
        lora=vllm_config.lora_config is not None,
        tensor_parallel=pc.tensor_parallel_size,
        pipeline_parallel=pc.pipeline_parallel_size,
        data_parallel=pc.data_parallel_size,
        kv_transfer=vllm_config.kv_transfer_config is not None,
        quantization=mc.quantization,
    )
