"""LaunchFacts from a vLLM config, and the vLLM pieces the launch check needs (class paths, an offline
config for `vosti verify --model`)."""
from __future__ import annotations

from vllm.platforms import current_platform
from vllm.utils.import_utils import resolve_obj_by_qualname

from vosti_plugin.launch.autotuning import autotuned_kernels
from vosti_plugin.vllm import compat, text_tower
from vosti_plugin.launch.facts import LaunchFacts


def resolve_qualname(qualname: str):
    """The object at a dotted class path, as vLLM resolves --scheduler-cls and backend paths."""
    return resolve_obj_by_qualname(qualname)


def build_vllm_config(model: str, vllm_args: list[str]):
    """vLLM's own config for `vllm serve MODEL --attention-backend vosti ARGS`, built without an engine."""
    return build_offline_config(model, vllm_args)[0]


def build_offline_config(model: str, vllm_args: list[str]):
    """(vLLM config, TextTowerStandIn or None): a multimodal checkpoint whose vLLM module cannot be imported
    here (Gemma-3 without torchvision) is built as its text tower (vosti_plugin.vllm.text_tower)."""
    from vllm.engine.arg_utils import EngineArgs

    from vosti_plugin import register, selection
    from vosti_plugin.vllm import compat, patches
    from vosti_plugin.vllm.text_tower import text_tower_stand_in

    compat.require_supported_vllm()
    register()
    args = _engine_args_parser().parse_args(["--model", model, "--attention-backend", "vosti", *vllm_args])
    engine_args = EngineArgs.from_cli_args(args)
    selection.prepare_engine_args(engine_args)
    stand_in = text_tower_stand_in(engine_args)
    stock_create = patches.original(EngineArgs, "create_engine_config")   # no activation: nothing runs
    return stock_create(engine_args), stand_in


def _engine_args_parser():
    """vLLM's own `vllm serve` engine-args parser."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return EngineArgs.add_cli_args(FlexibleArgumentParser())


def cli_engine_kwargs(vllm_args: list[str]) -> dict:
    """`vllm serve` arguments as LLM keyword arguments, parsed by the parser the offline check uses:
    `--foo-bar X` -> foo_bar=X typed as vLLM types it, a bare flag -> True; defaults are left out."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    parser = _engine_args_parser()
    default = vars(parser.parse_args(["--model", "-"]))
    given = vars(parser.parse_args(["--model", "-", *vllm_args]))
    fields = {f.name for f in dataclasses.fields(EngineArgs)} - {"model"}
    return {k: v for k, v in given.items() if k in fields and v != default[k]}


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
        cls = resolve_qualname(configured)
    except Exception:   # reported by the scheduler obligation
        return configured
    class_built = getattr(cls, "class_built", None)
    return _name(class_built(async_scheduling)) if class_built else configured


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _accepts_multimodal_inputs(mc) -> bool:
    """Whether this launch takes images/video/audio (vLLM builds the encoder towers): not with
    --language-model-only or every modality limited to 0."""
    if getattr(mc, "multimodal_config", None) is None:
        return False
    text_only = bool(getattr(mc.multimodal_config, "language_model_only", False))
    try:
        return bool(mc.supports_multimodal_inputs)      # vLLM's own answer (reads the modality limits)
    except Exception:   # an older vLLM, or no multimodal processor info for this config: only the flag counts
        return not text_only


def facts_from_vllm_config(vllm_config) -> LaunchFacts:
    mc = vllm_config.model_config
    cc = vllm_config.cache_config
    sc = vllm_config.scheduler_config
    pc = vllm_config.parallel_config
    hf = mc.hf_text_config

    window = getattr(hf, "sliding_window", None)
    if getattr(hf, "use_sliding_window", True) is False:
        window = None
    autotuned = autotuned_kernels()
    extra = {"autotuned_kernels": autotuned} if autotuned else {}
    architecture = ",".join(getattr(mc.hf_config, "architectures", None) or [])
    multimodal_inputs = _accepts_multimodal_inputs(mc)
    stand_in = text_tower.stand_in_of(mc.hf_config)
    prefix_lm = bool(getattr(mc, "is_mm_prefix_lm", False))
    loader = bool(stand_in.served_as) if stand_in is not None else \
        prefix_lm and text_tower.has_text_tower_loader(mc.hf_config)
    if stand_in is not None:    # a multimodal checkpoint built as its text tower: judged as shipped
        architecture, multimodal_inputs = stand_in.architecture, stand_in.multimodal_inputs
        extra["text_tower"] = stand_in.note()
    return LaunchFacts(
        model=str(mc.model),
        architecture=architecture,
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
        attention_soft_cap=bool(getattr(hf, "attn_logit_softcapping", None)),
        scheduler_cls=_name(sc.scheduler_cls),
        scheduler_built=_built_scheduler(_name(sc.scheduler_cls), bool(sc.async_scheduling)),
        async_scheduling=bool(sc.async_scheduling),
        cascade_attention=compat.has_cascade_attention() and not bool(getattr(mc, "disable_cascade_attn", True)),
        speculative=vllm_config.speculative_config is not None,
        lora=vllm_config.lora_config is not None,
        tensor_parallel=pc.tensor_parallel_size,
        pipeline_parallel=pc.pipeline_parallel_size,
        data_parallel=pc.data_parallel_size,
        tp_collective=compat.tp_collective() if pc.tensor_parallel_size > 1 else "",
        collective_passes=compat.collective_passes(vllm_config),
        kv_transfer=vllm_config.kv_transfer_config is not None,
        quantization=mc.quantization,
        multimodal_inputs=multimodal_inputs,
        prefix_lm_attention=prefix_lm,
        text_tower_loader=loader,
        autotune=bool(autotuned),
        extra=extra,
    )
