"""Negative (completeness control that cannot be proved): keys past a row's position are masked by adding
-inf to the score (`s + where(allowed, 0, -inf)`) instead of selecting -inf, and no tile is selected away.
x + (-inf) is -inf only for x < +inf: a finite q * v past p can overflow to +inf, and +inf + -inf is NaN,
so an extra tile that holds keys past p (a prefill block) poisons the row while the decode launch of the
same row does not. Witness (Triton interpreter, BLOCK_M=16, BLOCK_N=32): v = [1, 2, 1e30]; the row at
p = 1 with q = 1e30 is NaN in a 3-row prefill and 1.0 as a decode row. The value past p reaches the row
through the load of v, which is the line the verifier names."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rowsum import GRID, PARAMS, PREFIX

EXPECT = "read-equal-region"
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
        vals = tl.load(v + keys, mask=keys < k_len, other=0.0)  # BUG
        allowed = keys[None, :] <= pos[:, None]
        s = qv[:, None] * vals[None, :] + tl.where(allowed, 0.0, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        acc = acc * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
        m = m_new
    tl.store(o + rows, acc, mask=row_ok)
