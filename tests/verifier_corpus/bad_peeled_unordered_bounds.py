"""Negative: the peel bound is not clamped to the tile count, so the masked loop's range can run
backwards: the two loops are not one range (obligation loop-concat)."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._peeled_rowsum import masked_tile, whole_tile
from tests.verifier_corpus._rowsum import GRID, PARAMS, PREFIX

CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32}]
EXPECT = "loop-concat"


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
    m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    # the peel bound, unclamped: past `tiles` when last is a multiple of BLOCK_N
    for t in range(0, (last + BLOCK_N) // BLOCK_N):  # BUG
        m, acc = whole_tile(v, qv, t, m, acc, BLOCK_N)
    for t in range((last + BLOCK_N) // BLOCK_N, tiles):
        m, acc = masked_tile(v, qv, pos, t, m, acc, k_len, BLOCK_N)
    tl.store(o + rows, acc, mask=row_ok)
