"""Positive (integer model): the row is cast to int64 before it meets the stride, so row * stride cannot
wrap; column offsets stay int32 below the row length."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW

OBLIGATIONS = {"coverage", "read-equal-region", "int-overflow", "store-in-bounds"}


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def copy_rows_int64_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x + row * sx + cols, mask=cols < N, other=0.0)
        tl.store(y + row * sy + cols, v, mask=cols < N)
