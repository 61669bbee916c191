"""Negative (launch): the chunk width is passed positionally, chosen from the number of rows."""
import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import GRID, PARAMS, ROW

EXPECT = "launch-config"
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
    block = 256 if x.shape[0] > 64 else 64
    rowcopy_kernel[(x.shape[0],)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0),
                                  block)  # BUG
    return y
