"""Negative (memory model): weights past the row's length are 0, but the values are loaded without a mask:
past the length they are whatever memory holds (inf or NaN possible), and 0 * NaN is NaN, not 0."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "read-equal-region"
CONFIGS = [{"BLOCK": 64}]


@contract(
    params={"w": tensor(("KL",), (1,)), "v": tensor(("KL",), (1,)), "o": tensor(("Q",), (1,))},
    grid=("Q",),
    verif=[goal("prefix_weighted_sum", pre=("0 <= i < L.Q", "0 <= i < R.Q", "L.w[0:i + 1] == R.w[0:i + 1]",
                                            "L.v[0:i + 1] == R.v[0:i + 1]"),
                post=("L.o[i] == R.o[i]",))],
)
@triton.jit
def prefix_weighted_sum_kernel(w, v, o, Q, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    acc = 0.0
    for c in range(0, i + 1, BLOCK):
        keys = c + tl.arange(0, BLOCK)
        ok = keys <= i
        wt = tl.where(ok, tl.load(w + keys, mask=ok, other=0.0), 0.0)
        acc += tl.sum(wt * tl.load(v + keys), axis=0)  # BUG
    tl.store(o + i, acc)
