"""Negative: the descriptor view of `a` is read one row down, so row x reads a[x + 1]: past the one-row launch's M,
where its zero fill and the M-row launch's element differ (a view's loads are checked as loads of `a`)."""
import triton
import triton.language as tl

from tests.verifier_corpus._descriptor import CONFIGS, DESCRIPTOR_VIEW_MATMUL  # noqa: F401 (read by the corpus test)

EXPECT = "guard-agreement"


@DESCRIPTOR_VIEW_MATMUL
@triton.jit
def descriptor_view_other_rows_kernel(a, a_desc, w, c, M, N, K,
                                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a_t = a_desc.load([pid_m * BLOCK_M + 1, k0])  # BUG
        w_t = w.load([pid_n * BLOCK_N, k0])
        acc = tl.dot(a_t, w_t.T, acc, input_precision="ieee")
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
