"""Positive control for the two head-row mutants: each (token, head) program reads and writes its own row of
a strided [tokens, heads, H] view."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

CONFIGS = [{"BLOCK": 64}]
OBLIGATIONS = {"coverage", "read-equal-region", "write-race"}


@contract(
    params={"x": tensor(("M", "NH", "H"), ("sx", "sxh", 1)), "y": tensor(("M", "NH", "H"), ("sy", "syh", 1))},
    grid=("M", "NH"),
    verif=[goal("row_invariance", same=("H",), pre=("R.M == 1", "0 <= r < L.M", "L.NH == R.NH", "H <= BLOCK",
                                                   "L.x[r, :, :] == R.x[0, :, :]"),
                post=("L.y[r, :, :] == R.y[0, :, :]",))],
)
@triton.jit
def head_scale_kernel(x, y, H, sx, sxh, sy, syh, BLOCK: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < H
    v = tl.load(x + token * sx + head * sxh + cols, mask=ok, other=0.0)
    tl.store(y + token * sy + head * syh + cols, 2.0 * v, mask=ok)
