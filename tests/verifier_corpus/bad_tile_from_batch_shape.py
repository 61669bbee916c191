"""Negative: the reduction's chunking is chosen from a batch quantity (the number of sequences): wide
batches use half-width chunks, which regroups the sum of a row."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "read-equal-region"
CONFIGS = [{"BLOCK": 64}]


@contract(
    params={"x": tensor(("M", "H"), ("stride_x", 1)), "y": tensor(("M",), (1,))},
    grid=("M",),
    verif=[goal("row_invariance", same=("H",),
                pre=("R.M == 1", "0 <= r < L.M", "L.x[r, :] == R.x[0, :]"),
                post=("L.y[r] == R.y[0]",))],
)
@triton.jit
def chunk_from_batch_kernel(x, y, M, H, num_seqs, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    width = tl.where(num_seqs > 8, BLOCK // 2, BLOCK)  # tile chosen from batch shape
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(0, tl.cdiv(H, width)):
        cols = c * width + tl.arange(0, BLOCK)
        ok = (cols < H) & (tl.arange(0, BLOCK) < width)
        acc += tl.load(x + row * stride_x + cols, mask=ok, other=0.0)
    tl.store(y + row, tl.sum(acc, axis=0))
