"""Negative (integer model): row * stride in int32 (the program id is int32 and so is a stride below 2**31):
it wraps once the rows before this one hold 2**31 elements, and the program reads another row."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW

EXPECT = "int-overflow"


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def copy_rows_int32_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x + row * sx + cols, mask=cols < N, other=0.0)  # BUG
        tl.store(y + row.to(tl.int64) * sy + cols, v, mask=cols < N)
