"""Negative (memory model): a shifted copy stores row r into y[r - 1]; program 0 writes before the tensor."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "store-in-bounds"
CONFIGS = [{"BLOCK": 64}]


@contract(
    params={"x": tensor(("M", "N"), ("sx", 1)), "y": tensor(("M", "N"), ("sy", 1))},
    grid=("M",),
    verif=[goal("shifted", same=("N",), pre=("1 <= r < L.M", "1 <= r < R.M", "N <= BLOCK", "L.x[r, :] == R.x[r, :]"),
                post=("L.y[r - 1, :] == R.y[r - 1, :]",))],
)
@triton.jit
def shift_rows_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + row * sx + cols, mask=cols < N, other=0.0)
    tl.store(y + (row - 1) * sy + cols, v, mask=cols < N)  # BUG
