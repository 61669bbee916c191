"""The prefix row reduction of good_prefix_rowsum with its tile loop peeled the FlashAttention way: tiles every
row of the block sees whole run without the causal selects, in a loop of their own ahead of the masked loop
over the rest. The verifier reads consecutive loops over ranges [b0, b1), [b1, b2) as one loop over [b0, b2)
(obligation `loop-concat`: b0 <= b1 <= b2). The mutants change only the line marked `# BUG`."""
import triton
import triton.language as tl


@triton.jit
def masked_tile(v, qv, pos, t, m, acc, k_len, BLOCK_N: tl.constexpr):
    keys = t * BLOCK_N + tl.arange(0, BLOCK_N)
    vals = tl.load(v + keys, mask=keys < k_len, other=0.0)
    allowed = keys[None, :] <= pos[:, None]
    s = tl.where(allowed, qv[:, None] * vals[None, :], float("-inf"))
    live = t * BLOCK_N <= pos
    m_new = tl.maximum(m, tl.max(s, axis=1))
    acc_new = acc * tl.exp(m - m_new) + tl.sum(tl.where(allowed, tl.exp(s - m_new[:, None]), 0.0), axis=1)
    return tl.where(live, m_new, m), tl.where(live, acc_new, acc)


@triton.jit
def whole_tile(v, qv, t, m, acc, BLOCK_N: tl.constexpr):
    keys = t * BLOCK_N + tl.arange(0, BLOCK_N)
    vals = tl.load(v + keys)
    s = qv[:, None] * vals[None, :]
    m_new = tl.maximum(m, tl.max(s, axis=1))
    return m_new, acc * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
