"""Positive (op identity): one ieee dot whatever the batch; the precision is part of the operation and both
launches use the same one."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "PRECISION": "ieee"}]


@contract(
    params={"a": tensor(("M", "K"), ("stride_am", 1)), "b": tensor(("K", "N"), ("stride_bk", 1)),
            "c": tensor(("M", "N"), ("stride_cm", 1))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[goal("batch_invariance", same=("N", "K"),
                pre=("R.M == 1", "0 <= x < L.M", "L.a[x, :] == R.a[0, :]", "L.b[:, :] == R.b[:, :]"),
                post=("L.c[x, :] == R.c[0, :]",))],
    bounds=tuple(f"(K - 1) * {S}.stride_bk + N < 2**31" for S in "LR"),
)
@triton.jit
def fixed_precision_kernel(a, b, c, M, N, K, stride_am, stride_bk, stride_cm,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           PRECISION: tl.constexpr):
    rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + tl.arange(0, BLOCK_K)
        at = tl.load(a + rm[:, None] * stride_am + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        bt = tl.load(b + kk[:, None] * stride_bk + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(at, bt, acc, input_precision=PRECISION)
    tl.store(c + rm[:, None] * stride_cm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
