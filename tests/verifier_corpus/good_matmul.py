"""Positive example: a row-invariant matmul (K loop order depends on K only)."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}]


@contract(
    params={"a": tensor(("M", "K"), ("stride_am", "stride_ak")),
            "b": tensor(("K", "N"), ("stride_bk", "stride_bn")),
            "c": tensor(("M", "N"), ("stride_cm", "stride_cn"))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[goal("batch_invariance", same=("N", "K"),
                pre=("R.M == 1", "0 <= x < L.M", "L.a[x, :] == R.a[0, :]", "L.b[:, :] == R.b[:, :]"),
                post=("L.c[x, :] == R.c[0, :]",))],
    configs=CONFIGS,
    bounds=tuple(f"({S}.M - 1) * {S}.stride_am + (K - 1) * {S}.stride_ak < 2**31" for S in "LR")
    + tuple(f"(K - 1) * {S}.stride_bk + (N - 1) * {S}.stride_bn < 2**31" for S in "LR")
    + tuple(f"({S}.M - 1) * {S}.stride_cm + (N - 1) * {S}.stride_cn < 2**31" for S in "LR"),
)
@triton.jit
def matmul_kernel(a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a_t = tl.load(a + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                      mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b_t = tl.load(b + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                      mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a_t, b_t, acc)
    tl.store(c + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))
