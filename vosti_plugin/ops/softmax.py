"""Batch-invariant row reductions over the last dim: log_softmax, softmax and mean.

One program per row; every reduction walks column chunks of BLOCK (a function of the row length
only) in order into a BLOCK-wide accumulator, then reduces that vector once. Statistics are fp32.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor
from vosti_plugin.launch import guard
from vosti_plugin.triton_mode import interpreting, use_lane_invariant_interpreter

use_lane_invariant_interpreter()

__all__ = ["RowConfig", "log_softmax", "mean_last_dim", "select_config", "softmax"]

_MAX_BLOCK = 4096


@dataclass(frozen=True)
class RowConfig:
    block: int
    num_warps: int


def select_config(n_cols: int) -> RowConfig:
    """Chunk width and warps for rows of n_cols elements. Never sees the row count."""
    block = min(triton.next_power_of_2(max(n_cols, 1)), _MAX_BLOCK)
    num_warps = 1 if block <= 256 else 4 if block <= 2048 else 8
    return RowConfig(block=block, num_warps=num_warps)


# Relational contract (checked by `vosti verify`): equal x rows give equal y rows, whatever the number of
# rows of either launch.
# Why: program r reads row r only. m = max(running max over chunks c0 = 0, BLOCK, ... in order);
# s = tl.sum(acc) with acc[j] += exp(x - m) over the same chunks in order; y = x - m - log(s)
# (LOG) or exp(x - m) / s. The row count never enters the arithmetic.
_ROW_PRE = ("R.M == 1", "0 <= x < L.M", "L.x_ptr[x, :] == R.x_ptr[0, :]")


@contract(
    params={"x_ptr": tensor(("M", "V"), ("stride_x", 1)), "y_ptr": tensor(("M", "V"), ("stride_y", 1))},
    grid=("M",),
    verif=[goal("row_invariance", same=("V",), pre=_ROW_PRE, post=("L.y_ptr[x, :] == R.y_ptr[0, :]",))],
    symbolic=("BLOCK",),
    assume=("BLOCK >= 1",),
)
@triton.jit
def softmax_kernel(
    x_ptr, y_ptr,
    V,
    stride_x, stride_y,
    LOG: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    run_max = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    for c0 in range(0, V, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride_x + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        run_max = tl.maximum(run_max, v)
    m = tl.max(run_max, axis=0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, V, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        ok = cols < V
        v = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=float("-inf")).to(tl.float32)
        acc += tl.where(ok, tl.exp(v - m), 0.0)
    s = tl.sum(acc, axis=0)
    for c0 in range(0, V, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        ok = cols < V
        v = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
        if LOG:
            y = v - m - tl.log(s)
        else:
            y = tl.exp(v - m) / s
        tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


# Relational contract: equal x rows give equal means.
# Why: y[r] = tl.sum(acc) / V with acc[j] += x[r, c0 + j] over chunks c0 = 0, BLOCK, ... in order.
@contract(
    params={"x_ptr": tensor(("M", "V"), ("stride_x", 1)), "y_ptr": tensor(("M",), (1,))},
    grid=("M",),
    verif=[goal("row_invariance", same=("V",), pre=_ROW_PRE, post=("L.y_ptr[x] == R.y_ptr[0]",))],
    symbolic=("BLOCK",),
    assume=("BLOCK >= 1",),
)
@triton.jit
def mean_kernel(
    x_ptr, y_ptr,
    V,
    stride_x,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, V, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride_x + cols, mask=cols < V, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(y_ptr + row, (total / V).to(y_ptr.dtype.element_ty))


def _rows(x: torch.Tensor) -> torch.Tensor:
    if x.device.type == "cpu":
        if not interpreting():
            raise RuntimeError("vosti dense ops on CPU need TRITON_INTERPRET=1 set before triton is imported")
        x = x.float()
    x2 = x.reshape(-1, x.shape[-1]) if x.dim() > 0 else x.reshape(1, 1)
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


def _softmax(x: torch.Tensor, log: bool, dtype: torch.dtype | None) -> torch.Tensor:
    out_dtype = dtype or x.dtype
    x2 = _rows(x)
    y = torch.empty(x2.shape, device=x.device, dtype=torch.float32 if x.device.type == "cpu" else out_dtype)
    if x2.numel() > 0:
        cfg = select_config(x2.shape[1])
        guard.check(softmax_kernel, (x2.shape[0],), LOG=log, BLOCK=cfg.block)
        softmax_kernel[(x2.shape[0],)](
            x2, y, x2.shape[1], x2.stride(0), y.stride(0),
            LOG=log, BLOCK=cfg.block, num_warps=cfg.num_warps,
        )
    return y.view(x.shape).to(out_dtype)


def log_softmax(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """log_softmax over the last dim, result in `dtype` (default x.dtype); fp32 internally."""
    return _softmax(x, True, dtype)


def softmax(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """softmax over the last dim, result in `dtype` (default x.dtype); fp32 internally."""
    return _softmax(x, False, dtype)


def mean_last_dim(x: torch.Tensor, keepdim: bool = False, dtype: torch.dtype | None = None) -> torch.Tensor:
    """mean over the last dim with an fp32 accumulator, result in `dtype` (default x.dtype)."""
    out_dtype = dtype or x.dtype
    x2 = _rows(x)
    y = torch.empty((x2.shape[0],), device=x.device, dtype=torch.float32)
    if x2.shape[0] > 0:
        if x2.shape[1] == 0:
            y.fill_(float("nan"))
        else:
            cfg = select_config(x2.shape[1])
            guard.check(mean_kernel, (x2.shape[0],), BLOCK=cfg.block)
            mean_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), BLOCK=cfg.block, num_warps=cfg.num_warps)
    shape = x.shape[:-1] + ((1,) if keepdim else ())
    return y.view(shape).to(out_dtype)


def verifier_catalog() -> list[dict]:
    """The verifier's catalog of this module: every constexpr config the softmax and mean wrappers can launch
    (select_config's block for any row width: each power of two up to _MAX_BLOCK)."""
    import dataclasses

    blocks = [1 << i for i in range(_MAX_BLOCK.bit_length())]
    cfgs = [select_config(b) for b in blocks]
    soft = [({"BLOCK": c.block, "LOG": lg}, dataclasses.asdict(c)) for c in cfgs for lg in (False, True)]
    mean = [({"BLOCK": c.block}, dataclasses.asdict(c)) for c in cfgs]
    return [{"family": "softmax", "kernel": softmax_kernel, "configs": soft},
            {"family": "softmax", "kernel": mean_kernel, "configs": mean}]
