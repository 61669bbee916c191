"""Run our Triton kernels through Triton's interpreter when there is no GPU.

`triton.jit` decides between compiling and interpreting when a function is defined. vLLM imports
Triton before any plugin runs, so Triton's own library functions (tl.sum, tl.max, ...) were already
defined as compiled-mode functions; `ensure_interpreter_without_gpu` re-wraps them for the interpreter.
On CPU the interpreter is exact in fp32 (bf16 through it is broken, so CPU deployments use fp32).
"""
from __future__ import annotations

import os
import sys


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def _reinterpret_triton_library() -> None:
    if "triton.language" not in sys.modules:
        return
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    import triton.language as tl

    modules = [tl] + [sys.modules[n] for n in list(sys.modules)
                      if n.startswith("triton.language.") and sys.modules[n] is not None]
    owners = modules + [tl.tensor]
    wrapped: dict[int, InterpretedFunction] = {}
    for owner in owners:
        for name, obj in list(vars(owner).items()):
            if isinstance(obj, JITFunction):
                new = wrapped.setdefault(id(obj), InterpretedFunction(obj.fn))
                setattr(owner, name, new)


def use_lane_invariant_interpreter() -> None:
    """When kernels run through the interpreter, make its dot / reductions / math independent of the
    host's BLAS and of a row's lane (`vosti_plugin.interpreter_numerics`). Every kernel module calls
    this at import; idempotent, and nothing happens on a GPU."""
    if interpreting():
        from vosti_plugin import interpreter_numerics

        interpreter_numerics.install()


def ensure_interpreter_without_gpu() -> None:
    """Idempotent; call before importing any module that defines a vosti kernel."""
    if _has_gpu():
        return
    if not interpreting():
        os.environ["TRITON_INTERPRET"] = "1"
    _reinterpret_triton_library()
    use_lane_invariant_interpreter()
