"""Negative (launch): the number of K splits is a runtime scalar the contract needs equal in both launches
(`same`), but the host derives it from the number of rows (split-K for small batches)."""
import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "launch-scalar"
LAUNCH = True


@contract(
    params={"x": tensor(("M", "N"), ("sx", 1)), "y": tensor(("M",), (1,))},
    grid=("M",),
    verif=[goal("row_invariance", same=("N", "chunk"), pre=("R.M == 1", "0 <= r < L.M", "L.x[r, :] == R.x[0, :]"),
                post=("L.y[r] == R.y[0]",))],
)
@triton.jit
def chunked_rowsum_kernel(x, y, M, N, sx, chunk, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    total = 0.0
    for c0 in range(0, N, chunk):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for c in range(c0, c0 + chunk, BLOCK):
            cols = c + tl.arange(0, BLOCK)
            acc += tl.load(x + row * sx + cols, mask=(cols < N) & (cols < c0 + chunk), other=0.0)
        total += tl.sum(acc, axis=0)
    tl.store(y + row, total)


def chunked_rowsum(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape[0], device=x.device)
    splits = 4 if x.shape[0] < 16 else 1
    chunk = triton.cdiv(x.shape[1], splits)
    chunked_rowsum_kernel[(x.shape[0],)](x, y, x.shape[0], x.shape[1], x.stride(0), chunk,  # BUG
                                         BLOCK=64)
    return y
