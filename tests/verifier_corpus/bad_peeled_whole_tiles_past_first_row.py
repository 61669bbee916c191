"""Negative: the unmasked loop runs up to the block's last row, so rows before it see keys past their
position unmasked (the loops are still consecutive and ordered)."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._peeled_rowsum import masked_tile
from tests.verifier_corpus._rowsum import GRID, PARAMS, PREFIX

CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32}]
EXPECT = "read-equal-region"


@contract(params=PARAMS, grid=GRID, verif=[PREFIX])
@triton.jit
def peeled_rowsum_kernel(v, q, o, q_len, k_len, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < q_len
    pos = k_len - q_len + rows
    qv = tl.load(q + rows, mask=row_ok, other=0.0)
    first = k_len - q_len + tl.program_id(0) * BLOCK_M  # the block's first row's position
    last = tl.minimum(first + BLOCK_M, k_len)  # block's last key + 1
    tiles = tl.cdiv(last, BLOCK_N)
    whole = tl.minimum(last // BLOCK_N, tiles)  # the block's last row's whole tiles: keys past earlier rows
    m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for t in range(0, whole):
        keys = t * BLOCK_N + tl.arange(0, BLOCK_N)
        vals = tl.load(v + keys)  # reads keys past row x's position, outside what the contract makes equal
        s = qv[:, None] * vals[None, :]
        m_new = tl.maximum(m, tl.max(s, axis=1))
        acc = acc * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
        m = m_new
    for t in range(whole, tiles):
        m, acc = masked_tile(v, qv, pos, t, m, acc, k_len, BLOCK_N)
    tl.store(o + rows, acc, mask=row_ok)
