"""Negative: every row loops up to the longest sequence in the batch (max_len, another request's length)
and the extra tiles are not exact no-ops (masked values are added as zeros)."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal

from tests.verifier_corpus._rowsum import GRID, PARAMS

EXPECT = "masked-noop"
CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32}]


@contract(params=PARAMS, grid=GRID, verif=[goal(
    "prefix_equivalence",
    pre=("0 <= x < L.q_len", "0 <= y < R.q_len", "L.q_len <= L.k_len", "R.q_len <= R.k_len",
         "L.k_len <= L.max_len", "R.k_len <= R.max_len",
         "L.k_len - L.q_len + x == p", "R.k_len - R.q_len + y == p",
         "L.q[x] == R.q[y]", "L.v[0:p + 1] == R.v[0:p + 1]"),
    post=("L.o[x] == R.o[y]",))])
@triton.jit
def batch_max_bound_kernel(v, q, o, q_len, k_len, max_len, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < q_len
    pos = k_len - q_len + rows
    qv = tl.load(q + rows, mask=row_ok, other=0.0)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for t in range(0, tl.cdiv(max_len, BLOCK_N)):
        keys = t * BLOCK_N + tl.arange(0, BLOCK_N)
        allowed = keys[None, :] <= pos[:, None]
        vals = tl.load(v + keys, mask=keys < k_len, other=0.0)
        acc += tl.sum(tl.where(allowed, qv[:, None] * vals[None, :], 0.0), axis=1)
    tl.store(o + rows, acc, mask=row_ok)
