"""Negative: the K reduction is split in two at a point chosen from M (split-K chosen from batch size)."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "loop-range"
CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}]


@contract(
    params={"a": tensor(("M", "K"), ("stride_am", 1)), "b": tensor(("K", "N"), ("stride_bk", 1)),
            "c": tensor(("M", "N"), ("stride_cm", 1))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[goal("batch_invariance", same=("N", "K"),
                pre=("R.M == 1", "0 <= x < L.M", "L.a[x, :] == R.a[0, :]", "L.b[:, :] == R.b[:, :]"),
                post=("L.c[x, :] == R.c[0, :]",))],
)
@triton.jit
def splitk_by_m_kernel(a, b, c, M, N, K, stride_am, stride_bk, stride_cm,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    n_tiles = tl.cdiv(K, BLOCK_K)
    split = tl.where(M > 64, n_tiles // 2, n_tiles)  # small batches do not split
    lo = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, split):
        kk = k * BLOCK_K + rk
        at = tl.load(a + rm[:, None] * stride_am + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        bt = tl.load(b + kk[:, None] * stride_bk + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        lo = tl.dot(at, bt, lo)
    hi = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(split, n_tiles):
        kk = k * BLOCK_K + rk
        at = tl.load(a + rm[:, None] * stride_am + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        bt = tl.load(b + kk[:, None] * stride_bk + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        hi = tl.dot(at, bt, hi)
    tl.store(c + rm[:, None] * stride_cm + rn[None, :], lo + hi, mask=(rm[:, None] < M) & (rn[None, :] < N))
