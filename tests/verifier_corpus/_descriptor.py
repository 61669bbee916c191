"""Shared contracts of the corpus's TMA-descriptor matmuls: c = a @ w^T with a [M, K] and w [N, K] read
through descriptors in (BLOCK_M | BLOCK_N) x BLOCK_K blocks; row x of an M-row launch must equal the
one-row launch's row. DESCRIPTOR_VIEW_MATMUL reads `a` through a descriptor built on the pointer parameter `a`
itself (`view_of`): the precondition speaks of `a`, and a load of `a_desc` is a load of `a`."""
from vosti_plugin.verifier.contracts import contract, goal, tensor, tensor_descriptor

CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}]
_W = tensor_descriptor(("N", "K"), ("K", 1), ("BLOCK_N", "BLOCK_K"))
_C = tensor(("M", "N"), ("N", 1))


def _matmul_contract(a_params: dict):
    return contract(
        params={**a_params, "w": _W, "c": _C},
        grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
        verif=[goal("batch_invariance", same=("N", "K"),
                    pre=("R.M == 1", "0 <= x < L.M", "L.a[x, :] == R.a[0, :]", "L.w[:, :] == R.w[:, :]"),
                    post=("L.c[x, :] == R.c[0, :]",))],
        bounds=tuple(f"{S}.M * N < 2**31" for S in "LR"),
    )


DESCRIPTOR_MATMUL = _matmul_contract({"a": tensor_descriptor(("M", "K"), ("K", 1), ("BLOCK_M", "BLOCK_K"))})
DESCRIPTOR_VIEW_MATMUL = _matmul_contract({
    "a": tensor(("M", "K"), ("K", 1)),
    "a_desc": tensor_descriptor(("M", "K"), ("K", 1), ("BLOCK_M", "BLOCK_K"), view_of="a", view_dims=(0, 1))})
