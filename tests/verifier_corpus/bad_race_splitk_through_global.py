"""Negative (memory model): split-K whose partials meet through global memory inside one launch: program
(row, 0) reads the partials programs (row, s > 0) store, in whatever order the programs run."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "read-after-write"
CONFIGS = [{"BLOCK": 64, "SPLITS": 4}]


@contract(
    params={"x": tensor(("M", "K"), ("sx", 1)), "ws": tensor(("M", "S"), ("sw", 1)), "y": tensor(("M",), (1,))},
    grid=("M", "SPLITS"),
    verif=[goal("row_invariance", same=("K", "S"), pre=("R.M == 1", "0 <= r < L.M", "L.x[r, :] == R.x[0, :]",
                                                         "S == SPLITS", "L.ws[r, :] == R.ws[0, :]"),
                post=("L.y[r] == R.y[0]",))],
)
@triton.jit
def splitk_race_kernel(x, ws, y, M, K, sx, sw, BLOCK: tl.constexpr, SPLITS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(s * BLOCK, K, SPLITS * BLOCK):
        cols = c + tl.arange(0, BLOCK)
        acc += tl.load(x + row * sx + cols, mask=cols < K, other=0.0)
    tl.store(ws + row * sw + s, tl.sum(acc, axis=0))
    if s == 0:
        total = tl.load(ws + row * sw + 0)  # BUG
        for t in range(1, SPLITS):
            total += tl.load(ws + row * sw + t)
        tl.store(y + row, total)
