"""Quiet numpy's floating-point warnings inside vosti's kernels when Triton's interpreter runs them.

The interpreter computes every lane of a block, masked or not; a masked-off lane of an online softmax
holds -inf - -inf or 0/0, and numpy warns ("invalid value encountered in subtract/divide") although the
kernel never stores or uses that lane. Only launches of kernels defined in vosti_plugin are wrapped, in
numpy's errstate (a per-thread context), so the same arithmetic anywhere else still warns.
"""
from __future__ import annotations

import functools

import numpy as np

VOSTI_PACKAGE = "vosti_plugin."
_QUIET = dict(invalid="ignore", divide="ignore")


def is_vosti_kernel(interpreted) -> bool:
    return getattr(getattr(interpreted, "fn", None), "__module__", "").startswith(VOSTI_PACKAGE)


def install() -> bool:
    """Idempotent. Returns False where Triton has no interpreter to wrap."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except Exception:
        return False
    if getattr(InterpretedFunction.run, "_vosti_quiet", False):
        return True
    launch = InterpretedFunction.run

    @functools.wraps(launch)
    def run(self, *args, **kwargs):
        if not is_vosti_kernel(self):
            return launch(self, *args, **kwargs)
        with np.errstate(**_QUIET):
            return launch(self, *args, **kwargs)

    run._vosti_quiet = True
    InterpretedFunction.run = run
    return True
