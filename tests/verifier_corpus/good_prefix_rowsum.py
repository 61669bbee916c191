"""Positive: online-softmax style row reduction over a causal prefix; tiles on a fixed grid from 0, and a
tile holding no key of a row leaves that row's state unchanged by selection (not by arithmetic)."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rowsum import GRID, PARAMS, PREFIX

CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32}]


@contract(params=PARAMS, grid=GRID, verif=[PREFIX])
@triton.jit
def prefix_rowsum_kernel(v, q, o, q_len, k_len, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < q_len
    pos = k_len - q_len + rows
    qv = tl.load(q + rows, mask=row_ok, other=0.0)
    last = tl.minimum(k_len - q_len + tl.program_id(0) * BLOCK_M + BLOCK_M, k_len)  # block's last key + 1
    m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for t in range(0, tl.cdiv(last, BLOCK_N)):
        keys = t * BLOCK_N + tl.arange(0, BLOCK_N)
        vals = tl.load(v + keys, mask=keys < k_len, other=0.0)
        allowed = keys[None, :] <= pos[:, None]
        s = tl.where(allowed, qv[:, None] * vals[None, :], float("-inf"))
        live = t * BLOCK_N <= pos
        m_new = tl.maximum(m, tl.max(s, axis=1))
        acc_new = acc * tl.exp(m - m_new) + tl.sum(tl.where(allowed, tl.exp(s - m_new[:, None]), 0.0), axis=1)
        m = tl.where(live, m_new, m)
        acc = tl.where(live, acc_new, acc)
    tl.store(o + rows, acc, mask=row_ok)
