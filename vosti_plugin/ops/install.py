"""Route the dense ops of vLLM's forward and sampler through vosti's batch-invariant kernels.

Two layers, both undone by `disable()`:

* vLLM layers (`vllm=True`; the `ops` group of vosti_plugin.vllm.patches, replacements in
  vosti_plugin.vllm.ops_layers): `UnquantizedLinearMethod.apply` and `UnquantizedEmbeddingMethod.apply`
  (every unquantized linear and the lm_head) call `torch.ops.vosti.linear`; `RMSNorm.forward` and
  `GemmaRMSNorm.forward` (all norms of Llama, Qwen3 incl. qk-norm, Gemma-3 incl. its (1 + w) norms)
  call `torch.ops.vosti.rms_norm` / `fused_add_rms_norm`. These are opaque custom ops, so they survive
  torch.compile. On CPU the linear methods' weight packing (oneDNN / sgl, which deletes the plain
  weight) is skipped while installed. This is the set vLLM's own VLLM_BATCH_INVARIANT plumbing
  covers (linear.py, vocab_parallel_embedding.py, layernorm.py) plus GemmaRMSNorm, which it misses.
* aten (`aten=True`): a torch.library table overriding aten::mm, mm.dtype, addmm, _log_softmax,
  _softmax and mean.dim on the device's dispatch key (CUDA, or CPU where the kernels run through the
  Triton interpreter). That catches the sampler (log_softmax / softmax in vllm/v1/sample), the fp32
  lm_head path (`torch.mm(out_dtype=fp32)`) and any stray eager matmul. Inputs our kernels do not
  take (other dtypes, non-2-D mm) go to the stock `.out` overload, which this table leaves alone.

  `SiluAndMul.forward` and `GeluAndMul.forward` (approximate="tanh") call `torch.ops.vosti.act_and_mul`:
  per element, yet PyTorch's CPU elementwise kernels are not bitwise row invariant (see activation.py).

Rotary embedding, embedding lookup and residual adds are per-element or per-row gathers with no
transcendental tail paths: no cross-row reduction, so they are left as they are.
"""
from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

import torch

from vosti_plugin import forward_counters
from vosti_plugin.triton_mode import interpreting

__all__ = ["disable", "enable", "install_for_vllm", "installed", "is_enabled"]

_SUPPORTED = (torch.float32, torch.bfloat16, torch.float16)


class _State:
    def __init__(self) -> None:
        self.lib: torch.library.Library | None = None
        self.vllm = False   # the `ops` group of vosti_plugin.vllm.patches is applied
        self.enabled = False


_state = _State()


def is_enabled() -> bool:
    return _state.enabled


# ---------------------------------------------------------------- aten overrides


def _empty_out(like: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    return torch.empty(0, device=like.device, dtype=dtype or like.dtype)


def _takes_matmul(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dim() == 2 and b.dim() == 2 and a.dtype == b.dtype and a.dtype in _SUPPORTED


def mm_batch_invariant(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if not _takes_matmul(a, b):
        return torch.ops.aten.mm.out(a, b, out=_empty_out(a))
    from vosti_plugin.ops import matmul

    if forward_counters.counts is not None:
        forward_counters.counts["mm"] += 1
    return matmul.mm(a, b)


def mm_dtype_batch_invariant(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    if not (_takes_matmul(a, b) and out_dtype in _SUPPORTED):
        return torch.ops.aten.mm.dtype_out(a, b, out_dtype, out=_empty_out(a, out_dtype))
    from vosti_plugin.ops import matmul

    if forward_counters.counts is not None:
        forward_counters.counts["mm"] += 1
    return matmul.mm(a, b, out_dtype=out_dtype)


def addmm_batch_invariant(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1) -> torch.Tensor:
    row_bias = bias.dim() <= 2 and bias.numel() == b.shape[-1] and bias.shape[-1] == b.shape[-1]
    if not (_takes_matmul(a, b) and bias.dtype == a.dtype and row_bias and beta == 1 and alpha == 1):
        return torch.ops.aten.addmm.out(bias, a, b, beta=beta, alpha=alpha, out=_empty_out(a))
    from vosti_plugin.ops import matmul

    if forward_counters.counts is not None:
        forward_counters.counts["addmm"] += 1
    return matmul.addmm(bias.reshape(-1), a, b)


def _last_dim_view(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, int]:
    dim = dim % max(x.dim(), 1)
    return (x if dim == x.dim() - 1 else x.movedim(dim, -1)), dim


def _softmax_family(x: torch.Tensor, dim: int, half_to_float: bool, log: bool) -> torch.Tensor:
    out_dtype = torch.float32 if half_to_float else x.dtype
    if x.dtype not in _SUPPORTED or x.dim() == 0:
        op = torch.ops.aten._log_softmax.out if log else torch.ops.aten._softmax.out
        return op(x, dim, half_to_float, out=_empty_out(x, out_dtype))
    from vosti_plugin.ops import softmax

    if forward_counters.counts is not None:
        forward_counters.counts["log_softmax" if log else "softmax"] += 1
    xl, dim = _last_dim_view(x, dim)
    y = (softmax.log_softmax if log else softmax.softmax)(xl, dtype=out_dtype)
    return y if dim == x.dim() - 1 else y.movedim(-1, dim).contiguous()


def log_softmax_batch_invariant(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    return _softmax_family(x, dim, half_to_float, log=True)


def softmax_batch_invariant(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    return _softmax_family(x, dim, half_to_float, log=False)


def mean_dim_batch_invariant(x: torch.Tensor, dim, keepdim: bool = False, *, dtype=None) -> torch.Tensor:
    dims = [] if dim is None else [d % max(x.dim(), 1) for d in dim]
    out_dtype = dtype or x.dtype
    if not (x.dtype in _SUPPORTED and out_dtype in _SUPPORTED and x.dim() >= 1 and dims == [x.dim() - 1]):
        return torch.ops.aten.mean.out(x, dim, keepdim, dtype=dtype, out=_empty_out(x, out_dtype))
    from vosti_plugin.ops import softmax

    if forward_counters.counts is not None:
        forward_counters.counts["mean"] += 1
    return softmax.mean_last_dim(x, keepdim=keepdim, dtype=out_dtype)


def _aten_table(dispatch_key: str) -> torch.library.Library:
    with warnings.catch_warnings():
        # torch warns, once per process and in a dozen lines, that an aten kernel is overridden: here on purpose
        warnings.filterwarnings("ignore", message=r"\s*Warning only once for all operators")
        lib = _register(dispatch_key)
    logging.getLogger("vosti").info("aten mm, addmm, _softmax, _log_softmax and mean.dim on %s run vosti's "
                                    "batch-invariant kernels", dispatch_key)
    return lib


def _register(dispatch_key: str) -> torch.library.Library:
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("aten::mm", mm_batch_invariant, dispatch_key)
    if "dtype" in torch.ops.aten.mm.overloads():
        lib.impl("aten::mm.dtype", mm_dtype_batch_invariant, dispatch_key)
    lib.impl("aten::addmm", addmm_batch_invariant, dispatch_key)
    lib.impl("aten::_log_softmax", log_softmax_batch_invariant, dispatch_key)
    lib.impl("aten::_softmax", softmax_batch_invariant, dispatch_key)
    lib.impl("aten::mean.dim", mean_dim_batch_invariant, dispatch_key)
    return lib


# ---------------------------------------------------------------- public API


def _check_device(device_type: str) -> None:
    if device_type == "cpu":
        from vosti_plugin.ops import matmul

        if not interpreting() or type(matmul.mm_kernel).__name__ != "InterpretedFunction":
            raise RuntimeError(
                "vosti dense ops on CPU run through the Triton interpreter: set TRITON_INTERPRET=1 "
                "before vosti_plugin.ops kernels (and triton.jit users) are imported"
            )


def enable(*, device_type: str | None = None, aten: bool = True, vllm: bool = True) -> None:
    """Install the overrides. `device_type` is 'cuda' or 'cpu' (default: cuda if available).
    Idempotent: a second call while enabled changes nothing."""
    if _state.enabled:
        return
    device_type = device_type or ("cuda" if torch.cuda.is_available() else "cpu")
    _check_device(device_type)
    import vosti_plugin.ops.torch_ops  # noqa: F401  registers torch.ops.vosti.*

    try:
        if vllm:
            from vosti_plugin.vllm import patches

            _state.vllm = True
            patches.apply("ops")
        if aten:
            _state.lib = _aten_table("CUDA" if device_type == "cuda" else "CPU")
    except BaseException:
        _undo()
        raise
    _state.enabled = True


def _undo() -> None:
    if _state.lib is not None:
        _state.lib._destroy()
        _state.lib = None
    if _state.vllm:
        from vosti_plugin.vllm import patches

        patches.undo("ops")
        _state.vllm = False


def disable() -> None:
    """Remove every override installed by `enable()`: stock dispatch and stock vLLM methods return."""
    _undo()
    _state.enabled = False


@contextlib.contextmanager
def installed(*, device_type: str | None = None, aten: bool = True, vllm: bool = True) -> Iterator[None]:
    """`with installed(): ...` runs the block with the overrides, restoring stock behaviour after
    (unless they were already enabled before the block)."""
    already = _state.enabled
    enable(device_type=device_type, aten=aten, vllm=vllm)
    try:
        yield
    finally:
        if not already:
            disable()


def install_for_vllm() -> None:
    """Called by the plugin's register() in every vLLM process when vosti is selected. Idempotent."""
    enable(aten=True, vllm=True)
