"""Negative: split-K partial products are accumulated with tl.atomic_add (order of programs decides)."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

EXPECT = "subset"
CONFIGS = [{"BLOCK_N": 32, "BLOCK_K": 32}]


@contract(
    params={"a": tensor(("M", "K"), ("stride_am", 1)), "b": tensor(("K", "N"), ("stride_bk", 1)),
            "c": tensor(("M", "N"), ("stride_cm", 1))},
    grid=("M", "cdiv(N, BLOCK_N)", "cdiv(K, BLOCK_K)"),
    verif=[goal("batch_invariance", same=("N", "K"),
                pre=("R.M == 1", "0 <= x < L.M", "L.a[x, :] == R.a[0, :]", "L.b[:, :] == R.b[:, :]"),
                post=("L.c[x, :] == R.c[0, :]",))],
)
@triton.jit
def atomic_splitk_kernel(a, b, c, M, N, K, stride_am, stride_bk, stride_cm,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    kk = tl.program_id(2) * BLOCK_K + tl.arange(0, BLOCK_K)
    at = tl.load(a + row * stride_am + kk, mask=kk < K, other=0.0)
    bt = tl.load(b + kk[:, None] * stride_bk + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
    part = tl.sum(at[:, None] * bt, axis=0)
    tl.atomic_add(c + row * stride_cm + rn, part, mask=rn < N)
