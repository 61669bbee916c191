"""Negative (launch): the wrapper launches half the rows' programs (each program still does one row), so
the other half of the output is never written, whatever the kernel proof says about written rows."""
import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import GRID, PARAMS, ROW

EXPECT = "launch-grid"
LAUNCH = True


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def rowcopy_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        tl.store(y + row * sy + cols, tl.load(x + row * sx + cols, mask=cols < N, other=0.0), mask=cols < N)


def rowcopy(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    rows = x.shape[0]
    rowcopy_kernel[(rows // 2,)](x, y, rows, x.shape[1], x.stride(0), y.stride(0), BLOCK=64)  # BUG
    return y
