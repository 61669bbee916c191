"""Negative (coverage): a per-head kernel over [tokens, heads, H] whose store forgets the head offset, so every
head's program of a token writes the token's first row and no program writes the rows of its other heads."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._head_rows import CONFIGS, GRID, PARAMS, ROW

EXPECT = "coverage"


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def head_scale_kernel(x, y, H, sx, sxh, sy, syh, BLOCK: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < H
    v = tl.load(x + token * sx + head * sxh + cols, mask=ok, other=0.0)
    tl.store(y + token * sy + cols, 2.0 * v, mask=ok)  # BUG
