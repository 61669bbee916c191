"""Gated activations y = act(x[..., :d]) * x[..., d:] (SiLU for Llama / Qwen3, GELU-tanh for Gemma-3).

Per element, so row invariant by nature on GPU; on CPU, however, PyTorch's elementwise kernels split
the flattened tensor between threads and finish each thread's range with a scalar tail whose tanh
differs from the vectorized one (measured: gelu-tanh, d = 1000, M = 33 changes bits). Here every
element takes the same arithmetic wherever it sits.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor
from vosti_plugin.launch import guard
from vosti_plugin.ops import dependent_launch
from vosti_plugin.triton_mode import interpreting, use_lane_invariant_interpreter

use_lane_invariant_interpreter()

__all__ = ["BLOCK", "gelu_tanh_and_mul", "silu_and_mul"]

BLOCK = 1024
SILU, GELU_TANH = 0, 1


# Relational contract (checked by `vosti verify`): equal x rows give equal y rows, whatever the number of
# rows of either launch.
# Why: y[r, j] = cast(cast(act(x[r, j])) * x[r, D + j]) reads two elements of row r; no reduction.
@contract(
    params={"x_ptr": tensor(("M", "W"), ("stride_x", 1)), "y_ptr": tensor(("M", "D"), ("stride_y", 1))},
    grid=("M", "cdiv(D, BLOCK)"),
    verif=[goal("row_invariance", same=("D", "W"),
                pre=("R.M == 1", "0 <= x < L.M", "W == 2 * D", "L.x_ptr[x, :] == R.x_ptr[0, :]"),
                post=("L.y_ptr[x, :] == R.y_ptr[0, :]",))],
)
@triton.jit
def act_and_mul_kernel(
    x_ptr, y_ptr,
    D,
    stride_x, stride_y,
    ACT: tl.constexpr,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr = False,
):
    if PDL:
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < D
    a = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row * stride_x + D + cols, mask=ok, other=0.0).to(tl.float32)
    if ACT == 0:
        act = a / (1.0 + tl.exp(-a))
    else:
        u = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        tanh_u = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)
        act = 0.5 * a * (1.0 + tanh_u)
    act = act.to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (act * b).to(y_ptr.dtype.element_ty), mask=ok)


def _act_and_mul(x: torch.Tensor, act: int) -> torch.Tensor:
    out_dtype = x.dtype
    if x.device.type == "cpu":
        if not interpreting():
            raise RuntimeError("vosti dense ops on CPU need TRITON_INTERPRET=1 set before triton is imported")
        x = x.float()
    d = x.shape[-1] // 2
    x2 = x.reshape(-1, x.shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    y = torch.empty((x2.shape[0], d), device=x.device, dtype=x2.dtype)
    if y.numel():
        pdl = dependent_launch.enabled(x)
        guard.check(act_and_mul_kernel, (x2.shape[0], triton.cdiv(d, BLOCK)), ACT=act, BLOCK=BLOCK)
        act_and_mul_kernel[(x2.shape[0], triton.cdiv(d, BLOCK))](
            x2, y, d, x2.stride(0), y.stride(0), ACT=act, BLOCK=BLOCK, PDL=pdl, num_warps=4, launch_pdl=pdl,
        )
    return y.view(*x.shape[:-1], d).to(out_dtype)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    return _act_and_mul(x, SILU)


def gelu_tanh_and_mul(x: torch.Tensor) -> torch.Tensor:
    return _act_and_mul(x, GELU_TANH)


def verifier_catalog() -> list[dict]:
    """The verifier's catalog of this module: the activation constexprs `silu_and_mul`/`gelu_tanh_and_mul` launch."""
    return [{"family": "activation", "kernel": act_and_mul_kernel,
             "configs": [({"ACT": act, "BLOCK": BLOCK}, {"act": name})
                         for act, name in ((SILU, "silu"), (GELU_TANH, "gelu_tanh"))]}]
