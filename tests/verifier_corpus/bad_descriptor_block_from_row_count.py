"""Negative: the descriptor's K blocks start at an offset taken from M (a launch-size quantity), so the
blocks a row reads, and the order they are summed in, change with the batch."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor, tensor_descriptor

EXPECT = "read-equal-region"
CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}]


@contract(
    params={"a": tensor_descriptor(("M", "K"), ("K", 1), ("BLOCK_M", "BLOCK_K")),
            "w": tensor_descriptor(("N", "K"), ("K", 1), ("BLOCK_N", "BLOCK_K")),
            "c": tensor(("M", "N"), ("N", 1))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[goal("batch_invariance", same=("N", "K"),
                pre=("R.M == 1", "0 <= x < L.M", "L.a[x, :] == R.a[0, :]", "L.w[:, :] == R.w[:, :]"),
                post=("L.c[x, :] == R.c[0, :]",))],
    bounds=tuple(f"{S}.M * N < 2**31" for S in "LR"),
)
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
