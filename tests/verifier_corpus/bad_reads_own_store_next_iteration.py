"""Negative (memory model): each chunk of a row rescales by a value the previous iteration stored to the
output, read back from global memory (a store-then-load through memory, not a register)."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from vosti_plugin.verifier.contracts import goal

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW

EXPECT = "read-after-write"
# even with y's rows equal on entry, the load reads what this launch stored, not y's entry value
ENTRY_EQUAL = goal(ROW.name, same=ROW.same, pre=ROW.pre + ("L.y[r, :] == R.y[0, :]",), post=ROW.post)


@contract(params=PARAMS, grid=GRID, verif=[ENTRY_EQUAL])
@triton.jit
def carry_through_memory_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        prev = tl.load(y + row * sy + cols - BLOCK, mask=(cols < N) & (cols >= BLOCK), other=1.0)  # BUG
        v = tl.load(x + row * sx + cols, mask=cols < N, other=0.0)
        tl.store(y + row * sy + cols, v * prev, mask=cols < N)
