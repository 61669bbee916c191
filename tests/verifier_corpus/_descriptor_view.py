"""Shared contract of the corpus's matmuls that read `a` through a TMA descriptor built on the pointer parameter
`a` itself (`view_of`): the precondition speaks of `a`, and a descriptor load of `a_desc` is a load of `a`."""
from vosti_plugin.verifier.contracts import contract, goal, tensor, tensor_descriptor

CONFIGS = [{"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}]
DESCRIPTOR_VIEW_MATMUL = contract(
    params={"a": tensor(("M", "K"), ("K", 1)),
            "a_desc": tensor_descriptor(("M", "K"), ("K", 1), ("BLOCK_M", "BLOCK_K"), view_of="a", view_dims=(0, 1)),
            "w": tensor_descriptor(("N", "K"), ("K", 1), ("BLOCK_N", "BLOCK_K")),
            "c": tensor(("M", "N"), ("N", 1))},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"),
    verif=[goal("batch_invariance", same=("N", "K"),
                pre=("R.M == 1", "0 <= x < L.M", "L.a[x, :] == R.a[0, :]", "L.w[:, :] == R.w[:, :]"),
                post=("L.c[x, :] == R.c[0, :]",))],
    bounds=tuple(f"{S}.M * N < 2**31" for S in "LR"),
)
