"""Lane-invariant numerics for Triton's interpreter: what vosti's kernels compute on a CPU.

Triton's interpreter evaluates `tl.dot` with `np.matmul`, i.e. with the host's BLAS. Whether a BLAS
GEMM gives a row the same bits at every lane of a tile depends on the kernel it picks for the CPU
(OpenBLAS's Haswell kernel, chosen on AMD EPYC and on any x86 with `OPENBLAS_CORETYPE=Haswell`, does
not), so a row's result would depend on its neighbours in the batch. `install()` replaces the
interpreter's host-dependent operations with ones whose per-element result is a function of that
element's inputs and of the reduced length only:

- `tl.dot`: every product rounded to the accumulator dtype, then summed over K by halving (element
  i + n//2 added to element i, an odd last element carried), then the accumulator added. The order is
  fixed by K; elementwise IEEE add and multiply are correctly rounded whatever the layout or SIMD width.
- `tl.sum` on floats: the same halving tree along the reduced axis (numpy's own sum is pairwise along a
  contiguous axis and sequential along a strided one, so its order depends on memory layout).
- `tl.max` / `tl.min` on floats: a halving tree of `fmax` / `fmin` (NaN-ignoring like the interpreter's
  `nanmax`), so which of +0 / -0 wins depends on positions within the row only.
- `tl.exp`, `exp2`, `log`, `log2`, `sin`, `cos`: numpy evaluates contiguous float arrays with its SIMD
  routines and strided ones with the C library, which can round differently; the argument is made
  contiguous so every element takes the SIMD routine.

Checked and left as they are: add / sub / mul / div / sqrt / fma (correctly rounded per element),
casts (`_convert_float`, elementwise), `maximum` / `minimum` / `where` (elementwise), loads and stores
(gathers and scatters), `cumsum` (sequential along its axis by definition), `argmax` / `argmin`
(leftmost index, order-free). The reduction order of this module differs from a GPU's MMA, so CPU and
GPU bits differ; the guarantee is per platform.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["PATCHES", "install", "installed", "tree_reduce", "undo"]

_MAX_PRODUCT_ELEMENTS = 1 << 22  # chunk the (M, K, N) product tensor over N beyond 16 MiB of fp32


def tree_reduce(x: np.ndarray, axis: int, combine: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Reduce `x` along `axis` by halving; the order depends on x.shape[axis] only. Drops `axis`."""
    x = np.moveaxis(x, axis, 0)
    if x.shape[0] == 0:
        raise ValueError("tree_reduce of an empty axis")
    while x.shape[0] > 1:
        n = x.shape[0]
        half = n // 2
        paired = combine(x[:half], x[half:2 * half])
        x = paired if n % 2 == 0 else np.concatenate([paired, x[2 * half:]], axis=0)
    return x[0]


def _is_float(a: np.ndarray) -> bool:
    return a.dtype in (np.float32, np.float64)


def fixed_order_matmul(a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """a (..., M, K) @ b (..., K, N) with each output element reduced over K in an order fixed by K."""
    a = a.astype(dtype, copy=False)
    b = b.astype(dtype, copy=False)
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    out_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (M, N)
    if K == 0:
        return np.zeros(out_shape, dtype=dtype)
    step = max(1, _MAX_PRODUCT_ELEMENTS // max(1, M * K))
    cols = []
    for n0 in range(0, N, step):
        products = a[..., :, :, None] * b[..., None, :, n0:n0 + step]   # (..., M, K, n)
        cols.append(tree_reduce(products, -2, np.add))
    return cols[0] if len(cols) == 1 else np.concatenate(cols, axis=-1)


def _interpreter():
    from triton.runtime import interpreter

    return interpreter


def _dot(self, a, b, d, input_precision, max_num_imprecise_acc):
    interp = _interpreter()
    if not (_is_float(d.data) and a.data.dtype == b.data.dtype and _is_float(a.data)):
        return _ORIGINALS["InterpreterBuilder.create_dot"](self, a, b, d, input_precision, max_num_imprecise_acc)
    result = fixed_order_matmul(a.data, b.data, d.data.dtype) + d.data
    return interp.TensorHandle(result, d.dtype.scalar)


def _reduce_sum(self, input):
    data = input.handle.data
    if not _is_float(data):
        return _ORIGINALS["ReduceOps.sum"](self, input)
    return self.to_tensor(_reduced(data, self.axis, self.keep_dims, np.add), input.dtype)


_TREE_FOR = {"nanmax": np.fmax, "nanmin": np.fmin}


def _reduce_min_max(self, input, val_reduce_op, idx_reduce_op=None):
    value = input[0] if isinstance(input, tuple) else input
    data = value.handle.data
    combine = _TREE_FOR.get(getattr(val_reduce_op, "__name__", ""))
    if combine is None or not _is_float(data):
        return _ORIGINALS["ReduceOps.min_max"](self, input, val_reduce_op, idx_reduce_op)
    val = self.to_tensor(_reduced(data, self.axis, self.keep_dims, combine), value.dtype)
    if idx_reduce_op is None:
        return val
    idx = self.to_tensor(idx_reduce_op(data, axis=self.axis, keepdims=self.keep_dims), _interpreter().tl.int32)
    return val, idx


def _reduced(data: np.ndarray, axis, keep_dims: bool, combine) -> np.ndarray:
    if axis is None:
        out = tree_reduce(data.reshape(-1), 0, combine)
        return out.reshape((1,) * data.ndim) if keep_dims else out
    out = tree_reduce(data, axis, combine)
    return np.expand_dims(out, axis) if keep_dims else out


def _contiguous_unary(np_fn):
    @functools.wraps(np_fn)
    def apply(x):
        return np_fn(np.ascontiguousarray(x))

    return lambda self, arg: self.unary_op(arg, apply)


@dataclass(frozen=True)
class Patch:
    owner: str       # class in triton.runtime.interpreter
    attribute: str
    why: str


PATCHES: tuple[Patch, ...] = (
    Patch("InterpreterBuilder", "create_dot", "np.matmul's result for a row depends on its lane (host BLAS)"),
    Patch("ReduceOps", "sum", "np.sum's order depends on memory layout"),
    Patch("ReduceOps", "min_max", "which of +0/-0 wins must not depend on SIMD lanes"),
    *(Patch("InterpreterBuilder", f"create_{name}", "numpy: SIMD for contiguous, libm for strided")
      for name in ("exp", "exp2", "log", "log2", "sin", "cos")),
)

_ORIGINALS: dict[str, object] = {}


def _replacements() -> dict[str, object]:
    return {
        "InterpreterBuilder.create_dot": _dot,
        "ReduceOps.sum": _reduce_sum,
        "ReduceOps.min_max": _reduce_min_max,
        **{f"InterpreterBuilder.create_{name}": _contiguous_unary(getattr(np, name))
           for name in ("exp", "exp2", "log", "log2", "sin", "cos")},
    }


def installed() -> bool:
    return bool(_ORIGINALS)


def install() -> None:
    """Idempotent. Replaces the interpreter operations listed in PATCHES (process-wide)."""
    if _ORIGINALS:
        return
    interp = _interpreter()
    for key, new in _replacements().items():
        owner, attribute = key.split(".")
        cls = getattr(interp, owner)
        _ORIGINALS[key] = cls.__dict__[attribute]
        setattr(cls, attribute, new)


def undo() -> None:
    """Restores the interpreter's own operations exactly."""
    interp = _interpreter()
    for key, original in _ORIGINALS.items():
        owner, attribute = key.split(".")
        setattr(getattr(interp, owner), attribute, original)
    _ORIGINALS.clear()
