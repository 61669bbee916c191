"""Positive (completeness): a persistent matmul; NUM_PROGS programs stride over the output tiles (tile t to
program t % NUM_PROGS), each tile's K loop runs k0 = 0, BLOCK_K, ... in order whatever M is."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract, goal, tensor

CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "NUM_PROGS": 8}]
_TILE = "(x // BLOCK_M) * cdiv(N, BLOCK_N) + e1 // BLOCK_N"


@contract(
    params={"a": tensor(("M", "K"), ("stride_am", 1)), "b": tensor(("K", "N"), ("stride_bk", 1)),
            "c": tensor(("M", "N"), ("stride_cm", 1))},
    grid=("NUM_PROGS",),
    verif=[goal("batch_invariance", same=("N", "K"),
                pre=("R.M == 1", "0 <= x < L.M", "L.a[x, :] == R.a[0, :]", "L.b[:, :] == R.b[:, :]"),
                post=("L.c[x, :] == R.c[0, :]",),
                witness={"L": {"pid0": f"({_TILE}) % NUM_PROGS", "tile": _TILE},
                         "R": {"pid0": "(e1 // BLOCK_N) % NUM_PROGS", "tile": "e1 // BLOCK_N"}})],
    bounds=tuple(f"(K - 1) * {S}.stride_bk + N < 2**31" for S in "LR"),
)
@triton.jit
def persistent_matmul_kernel(a, b, c, M, N, K, stride_am, stride_bk, stride_cm,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             NUM_PROGS: tl.constexpr):
    n_tiles_n = tl.cdiv(N, BLOCK_N)
    n_tiles = tl.cdiv(M, BLOCK_M) * n_tiles_n
    for tile in range(tl.program_id(0), n_tiles, NUM_PROGS):
        pid_m = tile // n_tiles_n
        pid_n = tile % n_tiles_n
        rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + tl.arange(0, BLOCK_K)
            at = tl.load(a + rm[:, None] * stride_am + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K),
                         other=0.0)
            bt = tl.load(b + kk[:, None] * stride_bk + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N),
                         other=0.0)
            acc = tl.dot(at, bt, acc, input_precision="ieee")
        tl.store(c + rm[:, None] * stride_cm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
