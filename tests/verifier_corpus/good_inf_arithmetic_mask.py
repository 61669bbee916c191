"""Positive (completeness): keys past a row's position are masked by adding -inf to the score rather than by
selecting -inf, on a score that is finite by construction (the product is selected to 0 first, so the
masked lane is 0 + -inf = -inf exactly, never +inf + -inf); tiles that hold no key of the row are selected
away. The -inf then flows through max / exp as in the where-masked kernel (exp(-inf - m) = 0)."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rowsum import GRID, PARAMS, PREFIX

CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32}]


@contract(params=PARAMS, grid=GRID, verif=[PREFIX])
@triton.jit
def inf_arithmetic_mask_kernel(v, q, o, q_len, k_len, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < q_len
    pos = k_len - q_len + rows
    qv = tl.load(q + rows, mask=row_ok, other=0.0)
    last = tl.minimum(k_len - q_len + tl.program_id(0) * BLOCK_M + BLOCK_M, k_len)
    m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for t in range(0, tl.cdiv(last, BLOCK_N)):
        keys = t * BLOCK_N + tl.arange(0, BLOCK_N)
        vals = tl.load(v + keys, mask=keys < k_len, other=0.0)
        allowed = keys[None, :] <= pos[:, None]
        bias = tl.where(allowed, 0.0, float("-inf"))
        s = tl.where(allowed, qv[:, None] * vals[None, :], 0.0) + bias
        live = t * BLOCK_N <= pos
        m_new = tl.maximum(m, tl.max(s, axis=1))
        acc_new = acc * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
        m = tl.where(live, m_new, m)
        acc = tl.where(live, acc_new, acc)
    tl.store(o + rows, acc, mask=row_ok)
