"""Negative: decode splits the KV range into a fixed NUMBER of partitions (NUM_SPLITS), so the partition
size, and with it the summation grouping of a row, follows the sequence length."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rowsum import GRID, PARAMS, PREFIX

EXPECT = "loop-range"
CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32, "NUM_SPLITS": 4}]


@contract(params=PARAMS, grid=GRID, verif=[PREFIX])
@triton.jit
def fixed_splits_kernel(v, q, o, q_len, k_len, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        NUM_SPLITS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < q_len
    pos = k_len - q_len + rows
    qv = tl.load(q + rows, mask=row_ok, other=0.0)
    tiles = tl.cdiv(tl.cdiv(k_len, NUM_SPLITS), BLOCK_N)  # tiles per split: grows with k_len
    total = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for sp in range(0, NUM_SPLITS):
        part = tl.zeros((BLOCK_M,), dtype=tl.float32)
        for t in range(sp * tiles, sp * tiles + tiles):
            keys = t * BLOCK_N + tl.arange(0, BLOCK_N)
            allowed = keys[None, :] <= pos[:, None]
            vals = tl.load(v + keys, mask=keys < k_len, other=0.0)
            part = tl.where(t * BLOCK_N <= pos, part + tl.sum(tl.where(allowed, qv[:, None] * vals[None, :], 0.0), axis=1), part)
        total = total + part
    tl.store(o + rows, total, mask=row_ok)
