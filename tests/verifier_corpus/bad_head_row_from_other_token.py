"""Negative (batch invariance): a per-head norm over [tokens, heads, H] that reads its head's row of the
previous token, which belongs to another request of the batch."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._head_rows import CONFIGS, GRID, PARAMS, ROW

EXPECT = "read-equal-region"


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def head_scale_kernel(x, y, H, sx, sxh, sy, syh, BLOCK: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < H
    src = tl.maximum(token - 1, 0)
    v = tl.load(x + src * sx + head * sxh + cols, mask=ok, other=0.0)  # BUG
    tl.store(y + token * sy + head * syh + cols, 2.0 * v, mask=ok)
