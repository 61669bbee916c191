"""Positive (memory model): values past the row's position are loaded (within the sequence) and multiplied
by exact zeros; the contract declares the sequence's values finite, so 0 * v is 0 on both sides."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

CONFIGS = [{"BLOCK": 64}]
OBLIGATIONS = {"coverage", "read-equal-region", "loop-invariant"}


@contract(
    params={"w": tensor(("KL",), (1,)), "v": tensor(("KL",), (1,)), "o": tensor(("Q",), (1,))},
    grid=("Q",),
    verif=[goal("prefix_weighted_sum", pre=("0 <= i < L.Q", "0 <= i < R.Q", "L.Q <= L.KL", "R.Q <= R.KL",
                                            "L.w[0:i + 1] == R.w[0:i + 1]", "L.v[0:i + 1] == R.v[0:i + 1]",
                                            "forall(j, 0 <= j < L.KL, finite(L.v[j]))",
                                            "forall(j, 0 <= j < R.KL, finite(R.v[j]))"),
                post=("L.o[i] == R.o[i]",))],
)
@triton.jit
def prefix_weighted_sum_kernel(w, v, o, Q, KL, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    acc = 0.0
    for c in range(0, i + 1, BLOCK):
        keys = c + tl.arange(0, BLOCK)
        ok = keys <= i
        wt = tl.where(ok, tl.load(w + keys, mask=ok, other=0.0), 0.0)
        acc += tl.sum(wt * tl.load(v + keys, mask=keys < KL, other=0.0), axis=0)
    tl.store(o + i, acc)
