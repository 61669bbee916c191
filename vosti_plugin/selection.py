"""How a user selects vosti, and what selecting it switches on.

`--attention-backend vosti` (any case), `attention_config={"backend": "vosti"}` or
`LLM(attention_backend="vosti")` all resolve to vLLM's existing `AttentionBackendEnum.CUSTOM` member,
overridden to point at our backend. A brand-new enum name would break when a spawned process unpickles
the config before plugins load; CUSTOM exists in every process.
"""
from __future__ import annotations

import logging
import os

from vosti_plugin.ops import gemm_rows
from vosti_plugin.vllm import compat

logger = logging.getLogger("vosti")

NAME = "vosti"
BACKEND_PATH = "vosti_plugin.attention.backend.VostiAttentionBackend"
SCHEDULER_PATH = "vosti_plugin.scheduler.VostiScheduler"   # becomes VostiAsyncScheduler when async is on
# Set in the process that builds the engine config; spawned engine-core and worker processes inherit
# it, so their plugin load knows vosti was chosen before any config reaches them.
ACTIVE_ENV = "VOSTI_ACTIVE"


def is_vosti_name(value) -> bool:
    return isinstance(value, str) and value.strip().lower() == NAME


def is_vosti_backend(value) -> bool:
    """True for the string 'vosti' or for CUSTOM while CUSTOM points at our backend."""
    if is_vosti_name(value):
        return True
    enum = compat.attention_backend_enum()
    return value is enum.CUSTOM and compat.custom_backend_path() == BACKEND_PATH


def _attention_config_backend(attention_config):
    if attention_config is None:
        return None
    if isinstance(attention_config, dict):
        return attention_config.get("backend")
    return getattr(attention_config, "backend", None)


def requested_in_engine_args(engine_args) -> bool:
    return is_vosti_backend(getattr(engine_args, "attention_backend", None)) or is_vosti_backend(
        _attention_config_backend(getattr(engine_args, "attention_config", None))
    )


def selected_in_config(vllm_config) -> bool:
    return is_vosti_backend(_attention_config_backend(getattr(vllm_config, "attention_config", None)))


# Default page size when the user gives none: a multiple of every KV tile in the attention catalog, so a
# tile never straddles pages (vLLM's own default, 16, is smaller than the bf16 tiles).
DEFAULT_PAGE_SIZE = 64
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
# Largest step captured as a (piecewise) CUDA graph when the user sets no capture sizes. vLLM's own default
# (2 x max_num_seqs, at most 512) leaves every prefill chunk eager, and an eager step of vosti's Triton launches
# is bound by their host time; graphed, Gemma-3-4B prefills 2-3x faster on the H200.
MAX_GRAPH_TOKENS = 2048
# Above TALL_MIN_ROWS the sizes step by the tall path's row tile: each size costs 0.1-0.3 s of capture at
# startup (H200), and a step padded to the next size then launches the same GEMM tiles as unpadded.
COARSE_GRAPH_STRIDE = gemm_rows.TALL_TILE_ROWS


def graph_capture_sizes(max_num_batched_tokens: int) -> list[int]:
    """1, 2, 4 and 8 tokens, then one size per GEMM row tile: multiples of the decode tiles' 16 rows up to
    MID_MIN_ROWS, of the mid tiles' 64 rows up to TALL_MIN_ROWS (16 with VOSTI_MID_GEMM=0), of the tall tiles'
    128 rows above, and the step budget itself (capped at MAX_GRAPH_TOKENS). Padding a step to the next size
    adds rows to the elementwise ops but no GEMM tile (attention runs outside the graphs on the real tokens)."""
    top = min(max_num_batched_tokens, MAX_GRAPH_TOKENS)
    mid_stride = gemm_rows.MID_TILE_ROWS if gemm_rows.mid_gemm_on() else gemm_rows.DECODE_TILE_ROWS
    sizes = [1, 2, 4, 8, *range(gemm_rows.DECODE_TILE_ROWS, gemm_rows.MID_MIN_ROWS, gemm_rows.DECODE_TILE_ROWS),
             *range(gemm_rows.MID_MIN_ROWS, gemm_rows.TALL_MIN_ROWS, mid_stride),
             *range(gemm_rows.TALL_MIN_ROWS, top, COARSE_GRAPH_STRIDE)]
    return sorted({s for s in sizes if s < top} | {top})


def prepare_engine_args(engine_args) -> None:
    """Settings vosti needs, applied before vLLM builds its config."""
    if getattr(engine_args, "block_size", None) is None:
        engine_args.block_size = DEFAULT_PAGE_SIZE
    if getattr(engine_args, "max_num_batched_tokens", None) is None:
        # Keeps the split-KV workspace of the largest step small enough for the fast (split) decode path.
        engine_args.max_num_batched_tokens = DEFAULT_MAX_NUM_BATCHED_TOKENS
    _graph_prefill_steps(engine_args)
    # async_scheduling stays as given (vLLM turns it on by default where it can): a step's batch then depends
    # on timing, which vosti's kernels are invariant to, and VostiScheduler becomes VostiAsyncScheduler,
    # which publishes a page only once its tokens are known.
    if getattr(engine_args, "scheduler_cls", None) in (None, ""):
        engine_args.scheduler_cls = SCHEDULER_PATH
    if compat.has_cascade_attention() and hasattr(engine_args, "disable_cascade_attn"):
        engine_args.disable_cascade_attn = True


def _capture_setting(engine_args, name: str):
    """The capture setting `name` as the user gave it, as an engine argument or inside compilation_config."""
    given = getattr(engine_args, name, None)
    if given is not None:
        return given
    cc = getattr(engine_args, "compilation_config", None)
    return cc.get(name) if isinstance(cc, dict) else getattr(cc, name, None)


def _graph_prefill_steps(engine_args) -> None:
    """Capture steps up to the step budget (graph_capture_sizes) unless the user chose capture sizes or eager
    mode. Piecewise graphs replay the dense ops with the step padded to a capture size; vosti's ops are
    row-invariant, so padding rows change no row, and attention stays outside the graph."""
    if getattr(engine_args, "enforce_eager", False) or not hasattr(engine_args, "max_cudagraph_capture_size"):
        return
    if any(_capture_setting(engine_args, n) is not None
           for n in ("max_cudagraph_capture_size", "cudagraph_capture_sizes")):
        return
    engine_args.cudagraph_capture_sizes = graph_capture_sizes(engine_args.max_num_batched_tokens)


def activate(vllm_config) -> None:
    """Called once the final config is known in the process that built it."""
    os.environ[ACTIVE_ENV] = "1"
    from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

    ensure_interpreter_without_gpu()   # before the check imports any kernel module
    from vosti_plugin.launch.check import check_launch_or_raise

    check_launch_or_raise(vllm_config)
    install_runtime()


def deactivate() -> None:
    if os.environ.pop(ACTIVE_ENV, None) is not None:
        uninstall_runtime()


def install_runtime() -> None:
    """Everything that must hold in a process that runs the model under vosti."""
    from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

    ensure_interpreter_without_gpu()
    from vosti_plugin import sampling

    sampling.install()   # batch-invariant sampler, per-request refusals (vosti_plugin/sampling/)
    try:
        from vosti_plugin.ops.install import install_for_vllm
    except ImportError:  # dense ops not shipped in this build
        return
    install_for_vllm()


def uninstall_runtime() -> None:
    from vosti_plugin import sampling

    sampling.uninstall()
    try:
        from vosti_plugin.ops.install import disable
    except ImportError:
        return
    disable()
