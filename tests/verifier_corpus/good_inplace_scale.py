"""Positive (memory model): an in-place update; each program reads its own row before it writes it, in the
same iteration, so no load sees another program's store."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

CONFIGS = [{"BLOCK": 64}]
OBLIGATIONS = {"coverage", "read-equal-region", "read-after-write"}


@contract(
    params={"y": tensor(("M", "N"), ("sy", 1))},
    grid=("M",),
    verif=[goal("row_invariance", same=("N",), pre=("R.M == 1", "0 <= r < L.M", "L.y[r, :] == R.y[0, :]"),
                post=("L.y[r, :] == R.y[0, :]",))],
)
@triton.jit
def scale_inplace_kernel(y, M, N, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(y + row * sy + cols, mask=cols < N, other=0.0)
        tl.store(y + row * sy + cols, 2.0 * v, mask=cols < N)
