"""What a launch check looks at, extracted from vLLM's config into plain data (by the vLLM adapter,
vosti_plugin.vllm.launch_facts) and from the kernels vosti launches (vosti_plugin.launch.autotuning)."""
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
    attention_soft_cap: bool = False  # attention logits soft-capped (Gemma-2's attn_logit_softcapping)
    scheduler_cls: str = ""         # as configured
    scheduler_built: str = ""       # what the engine constructs (VostiScheduler picks its async subclass)
    async_scheduling: bool = False
    cascade_attention: bool = False
    speculative: bool = False
    lora: bool = False
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    tp_collective: str = ""          # what the TP all-reduce runs (vosti_plugin.parallel.fixed_order.COLLECTIVE)
    collective_passes: tuple = ()    # enabled compile passes that rewrite collectives (all-reduce fusion, SP)
    kv_transfer: bool = False
    quantization: str | None = None
    multimodal_inputs: bool = False  # the launch takes images/video/audio (vLLM builds the encoder towers)
    prefix_lm_attention: bool = False  # attention layers built for a multimodal prefix LM (bidirectional over images)
    text_tower_loader: bool = False  # vosti serves this multimodal checkpoint's text tower when launched text only
    autotune: bool = False          # a launched kernel autotunes at run time (names in extra["autotuned_kernels"])
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def facts_from_vllm_config(vllm_config) -> LaunchFacts:
    """The facts of a vLLM config (read in vosti_plugin.vllm.launch_facts, the vLLM adapter)."""
    from vosti_plugin.vllm.launch_facts import facts_from_vllm_config as read

    return read(vllm_config)
