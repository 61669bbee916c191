"""Positive: `a` read through a descriptor view of the pointer parameter `a` (the precondition names only `a`),
its blocks reshaped through an added axis of size 1 and back; row x's blocks and their order do not depend on M."""
import triton
import triton.language as tl

from tests.verifier_corpus._descriptor import CONFIGS, DESCRIPTOR_VIEW_MATMUL  # noqa: F401 (read by the corpus test)


@DESCRIPTOR_VIEW_MATMUL
@triton.jit
def descriptor_view_matmul_kernel(a, a_desc, w, c, M, N, K,
                                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a_t = a_desc.load([pid_m * BLOCK_M, k0]).reshape(1, BLOCK_M, BLOCK_K).reshape(BLOCK_M, BLOCK_K)
        w_t = w.load([pid_n * BLOCK_N, k0])
        acc = tl.dot(a_t, w_t.T, acc, input_precision="ieee")
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
