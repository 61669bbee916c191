"""Negative (launch): the tile grid rounds down (M // BLOCK_M) where the contract counts cdiv(M, BLOCK_M)
programs: the last partial tile of rows is never computed."""
import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "launch-grid"
LAUNCH = True


@contract(
    params={"x": tensor(("M", "N"), ("sx", 1)), "y": tensor(("M", "N"), ("sy", 1))},
    grid=("cdiv(M, BLOCK_M)",),
    verif=[goal("row_invariance", same=("N",), pre=("R.M == 1", "0 <= r < L.M", "L.x[r, :] == R.x[0, :]"),
                post=("L.y[r, :] == R.y[0, :]",))],
)
@triton.jit
def tilecopy_kernel(x, y, M, N, sx, sy, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    for c in range(0, N, BLOCK_N):
        cols = c + tl.arange(0, BLOCK_N)
        ok = (rows[:, None] < M) & (cols[None, :] < N)
        tl.store(y + rows[:, None] * sy + cols[None, :], tl.load(x + rows[:, None] * sx + cols[None, :], mask=ok,
                                                                  other=0.0), mask=ok)


def tilecopy(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    M, N = x.shape
    tilecopy_kernel[(M // 16,)](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=16, BLOCK_N=64)  # BUG
    return y
