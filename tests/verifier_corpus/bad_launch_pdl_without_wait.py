"""Negative (launch): the wrapper asks for programmatic dependent launch but passes the kernel's PDL another value,
so the kernel may start before the kernel writing its input ends, with its wait compiled out."""
import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW  # noqa: F401

EXPECT = "launch-pdl"
LAUNCH = True


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def rowscale_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    if PDL:
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        tl.store(y + row * sy + cols, tl.load(x + row * sx + cols, mask=cols < N, other=0.0) * 2.0, mask=cols < N)


def rowscale(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    rowscale_kernel[(x.shape[0],)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0), BLOCK=64,  # BUG
                                 launch_pdl=x.is_cuda)
    return y
