"""Negative (integer model): the first tile of a window is (p - W) // BLOCK, negative for early rows;
Triton truncates toward zero where the verifier's arithmetic would round down."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "int-division"
CONFIGS = [{"BLOCK": 16, "W": 64}]


@contract(
    params={"v": tensor(("KL",), (1,)), "o": tensor(("KL",), (1,))},
    grid=("KL",),
    verif=[goal("window_sum", pre=("0 <= p < L.KL", "0 <= p < R.KL", "L.v[0:p + 1] == R.v[0:p + 1]"),
                post=("L.o[p] == R.o[p]",))],
)
@triton.jit
def window_sum_kernel(v, o, KL, BLOCK: tl.constexpr, W: tl.constexpr):
    p = tl.program_id(0)
    first = (p - W) // BLOCK  # BUG
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in range(0, W // BLOCK + 1):
        keys = (first + t) * BLOCK + tl.arange(0, BLOCK)
        ok = (keys >= 0) & (keys <= p) & (keys > p - W)
        acc += tl.load(v + keys, mask=ok, other=0.0)
    tl.store(o + p, tl.sum(acc, axis=0))
