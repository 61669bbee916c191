"""Positive: a row scaled and copied, launched with programmatic dependent launch: its first statement waits for
the kernel before it (`if PDL: gdc_wait()`), which the verifier drops, and the launch passes PDL and launch_pdl
alike."""
import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW  # noqa: F401

OBLIGATIONS = {"coverage", "read-equal-region"}


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def rowscale_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    if PDL:
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        tl.store(y + row * sy + cols, tl.load(x + row * sx + cols, mask=cols < N, other=0.0) * 2.0, mask=cols < N)


def rowscale(x: torch.Tensor, pdl: bool) -> torch.Tensor:
    y = torch.empty_like(x)
    rowscale_kernel[(x.shape[0],)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0), BLOCK=64, PDL=pdl,
                                 launch_pdl=pdl)
    return y
