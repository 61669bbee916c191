"""Negative (integer model): the offset is computed in int64 and then cast back to int32, dropping bits."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW

EXPECT = "int-overflow"


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def copy_rows_narrowed_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = (row * sx).to(tl.int32)  # BUG
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x + start + cols, mask=cols < N, other=0.0)
        tl.store(y + row * sy + cols, v, mask=cols < N)
