"""Batch-invariant RMSNorm and fused residual-add + RMSNorm (plain and Gemma's (1 + w) weights).

One program per row; the row's sum of squares runs over column chunks of BLOCK (a function of the
hidden size only) in order, so a row's result never depends on how many rows share the launch.
Numerics follow vLLM's native op: fp32 statistics; plain weights multiply the normalized value after
rounding it to the weight dtype, Gemma's (1 + w) multiplies in fp32.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, scalar, tensor
from vosti_plugin.launch import guard
from vosti_plugin.ops import dependent_launch
from vosti_plugin.triton_mode import interpreting, use_lane_invariant_interpreter

use_lane_invariant_interpreter()

__all__ = ["RMSNormConfig", "fused_add_rms_norm", "norm_add_rms_norm", "qk_rms_norm", "rms_norm", "select_config"]

_MAX_BLOCK = 8192


@dataclass(frozen=True)
class RMSNormConfig:
    block: int
    num_warps: int


def select_config(hidden: int) -> RMSNormConfig:
    """Chunk width and warps for a row of `hidden` elements. Never sees the row count."""
    block = min(triton.next_power_of_2(hidden), _MAX_BLOCK)
    num_warps = 1 if block <= 256 else 4 if block <= 2048 else 8
    return RMSNormConfig(block=block, num_warps=num_warps)


# Weight modes (constexpr WEIGHT_MODE)
NO_WEIGHT, PLAIN_WEIGHT, GEMMA_WEIGHT = 0, 1, 2


@triton.jit
def _weighted(normed, w_row, cols, ok, WEIGHT_MODE: tl.constexpr):
    """A normalized fp32 chunk times its weight as vLLM's norms apply it: a plain weight after rounding the
    chunk to the weight's dtype, Gemma's (1 + w) in fp32."""
    if WEIGHT_MODE == 1:
        w = tl.load(w_row + cols, mask=ok, other=0.0)
        normed = normed.to(w.dtype).to(tl.float32) * w.to(tl.float32)
    if WEIGHT_MODE == 2:
        normed = normed * (1.0 + tl.load(w_row + cols, mask=ok, other=0.0).to(tl.float32))
    return normed


# Relational contract (checked by `vosti verify`): token x of a launch of any number of tokens and the single
# token of a one-token launch, with equal x (and residual) rows and equal weights, get equal output (and
# residual output) rows. A token holds NH rows of H (NH = 1 for a hidden-state norm; the heads of a q/k norm,
# read in place from the strided qkv split, so no copy precedes the launch). Heads from first_w2_head on take
# the weight's second row (the k heads of a q/k norm launched with both weights), the others its first.
# Why: program (t, h) touches row (t, h) only; sum of squares = tl.sum(acc) where acc[j] accumulates the chunks
# c0 = 0, BLOCK, ... < H in order; the token count and the strides never enter the arithmetic.
_ROW_PRE = ("R.M == 1", "0 <= x < L.M", "L.NH == R.NH", "L.NW == 2", "R.NW == 2",
            "L.x_ptr[x, :, :] == R.x_ptr[0, :, :]", "L.res_ptr[x, :, :] == R.res_ptr[0, :, :]",
            "L.w_ptr[:, :] == R.w_ptr[:, :]")


def _rows3(name: str) -> dict:
    return tensor(("M", "NH", "H"), (f"stride_{name}", f"stride_{name}_h", 1))


@contract(
    params={"x_ptr": _rows3("x"), "res_ptr": _rows3("res"), "w_ptr": tensor(("NW", "H"), ("w_row_stride", 1)),
            "y_ptr": _rows3("y"), "res_out_ptr": _rows3("res_out"), "eps": scalar("float32")},
    grid=("M", "NH"),
    verif=[goal("row_invariance", same=("H", "eps", "first_w2_head"), pre=_ROW_PRE,
                post=("L.y_ptr[x, :, :] == R.y_ptr[0, :, :]",)),
           goal("residual_row_invariance", when="HAS_RESIDUAL", same=("H", "eps", "first_w2_head"), pre=_ROW_PRE,
                post=("L.res_out_ptr[x, :, :] == R.res_out_ptr[0, :, :]",))],
    symbolic=("BLOCK",),
    assume=("BLOCK >= 1",),
)
@triton.jit
def rms_norm_kernel(
    x_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr,
    H, eps, first_w2_head, w_row_stride,
    stride_x, stride_x_h, stride_res, stride_res_h, stride_y, stride_y_h, stride_res_out, stride_res_out_h,
    HAS_RESIDUAL: tl.constexpr,
    WEIGHT_MODE: tl.constexpr,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    w_row = w_ptr + (head >= first_w2_head).to(tl.int64) * w_row_stride
    x_row = x_ptr + token * stride_x + head * stride_x_h
    res_row = res_ptr + token * stride_res + head * stride_res_h
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, H, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        ok = cols < H
        v = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            v = v + tl.load(res_row + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(res_out_ptr + token * stride_res_out + head * stride_res_out_h + cols,
                     v.to(res_out_ptr.dtype.element_ty), mask=ok)
        acc += v * v
    inv_rms = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps)
    for c0 in range(0, H, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        ok = cols < H
        v = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32)
        if HAS_RESIDUAL:
            v = v + tl.load(res_row + cols, mask=ok, other=0.0).to(tl.float32)
        normed = _weighted(v * inv_rms, w_row, cols, ok, WEIGHT_MODE)
        tl.store(y_ptr + token * stride_y + head * stride_y_h + cols, normed.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _first_norm_plus_residual(x_row, res_row, w0_ptr, y_ptr, cols, ok, inv_rms0, WEIGHT_MODE: tl.constexpr):
    """The first norm of a column chunk, rounded to the output dtype as a stored and reloaded output is, plus the
    residual in fp32."""
    normed = _weighted(tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32) * inv_rms0, w0_ptr, cols, ok,
                       WEIGHT_MODE)
    return normed.to(y_ptr.dtype.element_ty).to(tl.float32) + tl.load(res_row + cols, mask=ok, other=0.0).to(tl.float32)


# Relational contract: row x of a launch of any number of rows and the one-row launch's row, with equal x and
# residual rows and equal weights, get equal output and residual output rows.
# Why: program r touches row r only, and runs rms_norm_kernel's steps back to back: the first norm's sum of
# squares over the x chunks in order, its output rounded to the output dtype (what the unfused pair stores and
# reloads), plus the residual in fp32 (stored, rounded, as the residual output), the second sum of squares over
# those sums in order, then the second norm. One launch instead of two for a norm whose output only feeds the
# next fused residual-add norm (Gemma's post-attention and pre-feedforward norms).
_PAIR_PRE = ("R.M == 1", "0 <= x < L.M", "L.x_ptr[x, :] == R.x_ptr[0, :]", "L.res_ptr[x, :] == R.res_ptr[0, :]",
             "L.w0_ptr[:] == R.w0_ptr[:]", "L.w_ptr[:] == R.w_ptr[:]")


@contract(
    params={"x_ptr": tensor(("M", "H"), ("stride_x", 1)), "w0_ptr": tensor(("H",), (1,)),
            "res_ptr": tensor(("M", "H"), ("stride_res", 1)), "w_ptr": tensor(("H",), (1,)),
            "y_ptr": tensor(("M", "H"), ("stride_y", 1)), "res_out_ptr": tensor(("M", "H"), ("stride_res_out", 1)),
            "eps0": scalar("float32"), "eps": scalar("float32")},
    grid=("M",),
    verif=[goal("row_invariance", same=("H", "eps0", "eps"), pre=_PAIR_PRE, post=("L.y_ptr[x, :] == R.y_ptr[0, :]",)),
           goal("residual_row_invariance", same=("H", "eps0", "eps"), pre=_PAIR_PRE,
                post=("L.res_out_ptr[x, :] == R.res_out_ptr[0, :]",))],
    symbolic=("BLOCK",),
    assume=("BLOCK >= 1",),
)
@triton.jit
def norm_add_rms_norm_kernel(
    x_ptr, w0_ptr, res_ptr, w_ptr, y_ptr, res_out_ptr,
    H, eps0, eps,
    stride_x, stride_res, stride_y, stride_res_out,
    WEIGHT_MODE: tl.constexpr,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    res_row = res_ptr + row * stride_res
    acc0 = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, H, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        v = tl.load(x_row + cols, mask=cols < H, other=0.0).to(tl.float32)
        acc0 += v * v
    inv_rms0 = 1.0 / tl.sqrt(tl.sum(acc0, axis=0) / H + eps0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, H, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        ok = cols < H
        v = _first_norm_plus_residual(x_row, res_row, w0_ptr, y_ptr, cols, ok, inv_rms0, WEIGHT_MODE)
        tl.store(res_out_ptr + row * stride_res_out + cols, v.to(res_out_ptr.dtype.element_ty), mask=ok)
        acc += v * v
    inv_rms = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps)
    for c0 in range(0, H, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        ok = cols < H
        v = _first_norm_plus_residual(x_row, res_row, w0_ptr, y_ptr, cols, ok, inv_rms0, WEIGHT_MODE)
        v = _weighted(v * inv_rms, w_ptr, cols, ok, WEIGHT_MODE)
        tl.store(y_ptr + row * stride_y + cols, v.to(y_ptr.dtype.element_ty), mask=ok)


def row_view(t: torch.Tensor) -> torch.Tensor:
    """t as [tokens, rows per token, H] with unit column stride: a view when t's leading dims merge (a q/k split
    of a fused qkv output, unflattened into heads, is read in place), else a copy."""
    if t.dim() == 1:
        t = t.unsqueeze(0)
    t3 = t.unsqueeze(-2) if t.dim() == 2 else t.reshape(-1, t.shape[-2], t.shape[-1])
    return t3 if t3.stride(-1) == 1 else t3.contiguous()


def kernel_weight(weight: torch.Tensor, cpu: bool) -> torch.Tensor:
    """The weight as the kernel reads it. On the GPU in its own dtype (the kernel widens it to fp32 exactly,
    so a per-call fp32 copy would only add a launch to every norm); the CPU path runs in fp32."""
    return weight.float().contiguous() if cpu else weight.contiguous()


def _launch(x, residual, weight, eps: float, gemma: bool, k_weight=None, first_k_head: int = 0):
    H = x.shape[-1]
    for name, w in (("weight", weight), ("k_weight", k_weight)):
        if w is not None and w.shape != (H,):
            raise ValueError(f"{name} must be ({H},), got {tuple(w.shape)}")
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"residual {tuple(residual.shape)} must match x {tuple(x.shape)}")
    out_dtype = x.dtype
    cpu = x.device.type == "cpu"
    if cpu and not interpreting():
        raise RuntimeError("vosti dense ops on CPU need TRITON_INTERPRET=1 set before triton is imported")
    x3 = row_view(x.float() if cpu else x)
    r3 = None if residual is None else row_view(residual.float() if cpu else residual)
    w = None if weight is None else kernel_weight(weight, cpu)
    if k_weight is None:   # one weight for every head
        first_w2_head, w_row_stride = x3.shape[1], 0
    else:   # the k weight as the weight's second row: its offset from the q weight, in elements
        k_w = kernel_weight(k_weight, cpu)
        if k_w.dtype != w.dtype or (k_w.data_ptr() - w.data_ptr()) % w.element_size():
            raise ValueError("q and k norm weights must share a dtype and element alignment")
        first_w2_head, w_row_stride = first_k_head, (k_w.data_ptr() - w.data_ptr()) // w.element_size()
    y = torch.empty(x3.shape, device=x.device, dtype=x3.dtype)
    r_out = torch.empty_like(y) if residual is not None else y
    if y.numel() > 0:
        cfg = select_config(H)
        mode = NO_WEIGHT if w is None else GEMMA_WEIGHT if gemma else PLAIN_WEIGHT
        grid = (x3.shape[0], x3.shape[1])
        r_in = r3 if r3 is not None else x3
        pdl = dependent_launch.enabled(y)
        guard.check(rms_norm_kernel, grid, HAS_RESIDUAL=residual is not None, WEIGHT_MODE=mode, BLOCK=cfg.block)
        rms_norm_kernel[grid](
            x3, r_in, w if w is not None else x3, y, r_out,
            H, float(eps), first_w2_head, w_row_stride,
            x3.stride(0), x3.stride(1), r_in.stride(0), r_in.stride(1), y.stride(0), y.stride(1),
            r_out.stride(0), r_out.stride(1),
            HAS_RESIDUAL=residual is not None, WEIGHT_MODE=mode, BLOCK=cfg.block, PDL=pdl,
            num_warps=cfg.num_warps, launch_pdl=pdl,
        )
    y = y.view(x.shape).to(out_dtype)
    if residual is None:
        return y
    return y, r_out.view(x.shape).to(residual.dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float, gemma: bool = False) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * w over the last dim (w -> 1 + w when gemma). Functional."""
    return _launch(x, None, weight, eps, gemma)


def qk_rms_norm(qk: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, num_q_heads: int, eps: float,
                gemma: bool = False) -> torch.Tensor:
    """The q and k norms of one attention layer in one launch: qk is [..., q heads + kv heads, head_dim] (the q
    and k parts of a fused qkv output, read in place); heads from num_q_heads on take k_weight."""
    if k_weight.shape != q_weight.shape:
        raise ValueError(f"k_weight {tuple(k_weight.shape)} must match q_weight {tuple(q_weight.shape)}")
    if not 0 < num_q_heads < qk.shape[-2]:
        raise ValueError(f"num_q_heads={num_q_heads} must leave both q and k heads in {tuple(qk.shape)}")
    return _launch(qk, None, q_weight, eps, gemma, k_weight=k_weight, first_k_head=num_q_heads)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, gemma: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + residual), x + residual) with the sum kept in fp32 for the statistics, as vLLM's
    native op does. Functional: x and residual are not modified."""
    return _launch(x, residual, weight, eps, gemma)


def norm_add_rms_norm(
    x: torch.Tensor, weight0: torch.Tensor, eps0: float, residual: torch.Tensor, weight: torch.Tensor, eps: float,
    gemma: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """fused_add_rms_norm(rms_norm(x, weight0, eps0), residual, weight, eps) in one launch, bit for bit: the first
    norm's output is rounded to x's dtype before the add, as the two launches store and reload it."""
    H = x.shape[-1]
    for name, w in (("weight0", weight0), ("weight", weight)):
        if w.shape != (H,):
            raise ValueError(f"{name} must be ({H},), got {tuple(w.shape)}")
    if residual.shape != x.shape:
        raise ValueError(f"residual {tuple(residual.shape)} must match x {tuple(x.shape)}")
    cpu = x.device.type == "cpu"
    if cpu and not interpreting():
        raise RuntimeError("vosti dense ops on CPU need TRITON_INTERPRET=1 set before triton is imported")
    x2 = row_view(x.float() if cpu else x)[:, 0]
    r2 = row_view(residual.float() if cpu else residual)[:, 0]
    y = torch.empty(x2.shape, device=x.device, dtype=x2.dtype)
    r_out = torch.empty_like(y)
    if y.numel() > 0:
        cfg = select_config(H)
        mode = GEMMA_WEIGHT if gemma else PLAIN_WEIGHT
        pdl = dependent_launch.enabled(y)
        guard.check(norm_add_rms_norm_kernel, (x2.shape[0],), WEIGHT_MODE=mode, BLOCK=cfg.block)
        norm_add_rms_norm_kernel[(x2.shape[0],)](
            x2, kernel_weight(weight0, cpu), r2, kernel_weight(weight, cpu), y, r_out,
            H, float(eps0), float(eps),
            x2.stride(0), r2.stride(0), y.stride(0), r_out.stride(0),
            WEIGHT_MODE=mode, BLOCK=cfg.block, PDL=pdl, num_warps=cfg.num_warps, launch_pdl=pdl,
        )
    return y.view(x.shape).to(x.dtype), r_out.view(x.shape).to(residual.dtype)


def verifier_catalog() -> list[dict]:
    """The verifier's catalog of this module: every constexpr config `rms_norm`/`fused_add_rms_norm` can launch
    (select_config's block for any hidden size: each power of two up to _MAX_BLOCK)."""
    import dataclasses

    cfgs = [select_config(1 << i) for i in range(_MAX_BLOCK.bit_length())]
    return [{"family": "rms_norm", "kernel": rms_norm_kernel,
             "configs": [({"BLOCK": c.block, "HAS_RESIDUAL": r, "WEIGHT_MODE": w}, dataclasses.asdict(c))
                         for c in cfgs for r in (False, True) for w in (NO_WEIGHT, PLAIN_WEIGHT, GEMMA_WEIGHT)]},
            {"family": "rms_norm", "kernel": norm_add_rms_norm_kernel,
             "configs": [({"BLOCK": c.block, "WEIGHT_MODE": w}, dataclasses.asdict(c))
                         for c in cfgs for w in (PLAIN_WEIGHT, GEMMA_WEIGHT)]}]
