"""Negative: the descriptor's K blocks start at an offset taken from M (a launch-size quantity), so the
blocks a row reads, and the order they are summed in, change with the batch."""
import triton
import triton.language as tl

from tests.verifier_corpus._descriptor import CONFIGS, DESCRIPTOR_MATMUL  # noqa: F401 (the corpus test reads CONFIGS)

EXPECT = "read-equal-region"


@DESCRIPTOR_MATMUL
@triton.jit
def descriptor_shifted_kernel(a, w, c, M, N, K,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a_t = a.load([pid_m * BLOCK_M, k0 + M % 2])  # BUG
        w_t = w.load([pid_n * BLOCK_N, k0])
        acc = tl.dot(a_t, w_t.T, acc, input_precision="ieee")
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
