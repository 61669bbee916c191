"""Negative: keys are masked by the request's length (k_len) instead of the row's causal position, so a
prefill row reads keys after its own position."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rowsum import GRID, PARAMS, PREFIX

EXPECT = "read-equal-region"
CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32}]


@contract(params=PARAMS, grid=GRID, verif=[PREFIX])
@triton.jit
def beyond_prefix_kernel(v, q, o, q_len, k_len, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < q_len
    qv = tl.load(q + rows, mask=row_ok, other=0.0)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for t in range(0, tl.cdiv(k_len, BLOCK_N)):
        keys = t * BLOCK_N + tl.arange(0, BLOCK_N)
        vals = tl.load(v + keys, mask=keys < k_len, other=0.0)
        acc += tl.sum(qv[:, None] * vals[None, :], axis=1)
    tl.store(o + rows, acc, mask=row_ok)
