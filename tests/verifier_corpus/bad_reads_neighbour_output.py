"""Negative (memory model): an in-place smoothing that reads the next row of its own output tensor, which
another program of the same launch may already have overwritten."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "read-after-write"
CONFIGS = [{"BLOCK": 64}]


@contract(
    params={"y": tensor(("M", "N"), ("sy", 1))},
    grid=("M",),
    verif=[goal("row_invariance", same=("N",), pre=("R.M == 1", "0 <= r < L.M", "N <= BLOCK", "L.y[:, :] == R.y[:, :]"),
                post=("L.y[r, :] == R.y[0, :]",))],
)
@triton.jit
def smooth_inplace_kernel(y, M, N, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < N
    here = tl.load(y + row * sy + cols, mask=ok, other=0.0)
    below = tl.load(y + (row + 1) * sy + cols, mask=ok & (row + 1 < M), other=0.0)  # BUG
    tl.store(y + row * sy + cols, 0.5 * (here + below), mask=ok)
