"""Shared contract pieces of the small attention-like corpus kernels.

Each kernel reduces, for query row i of one sequence at position p = k_len - q_len + i, the values
v[0..p] (a causal prefix) in tiles of BLOCK_N; the contract is prefix equivalence: rows at the same
position in two launches with different query/key lengths (prefill vs decode, chunking) and equal
v on [0, p] give equal outputs.
"""
from vosti_plugin.verifier.contracts import goal, tensor

PARAMS = {"v": tensor(("KL",), (1,)), "q": tensor(("QL",), (1,)), "o": tensor(("QL",), (1,))}
PREFIX = goal(
    "prefix_equivalence",
    pre=("0 <= x < L.q_len", "0 <= y < R.q_len", "L.q_len <= L.k_len", "R.q_len <= R.k_len",
         "L.q_len <= L.QL", "R.q_len <= R.QL",
         "L.k_len - L.q_len + x == p", "R.k_len - R.q_len + y == p",
         "L.q[x] == R.q[y]", "L.v[0:p + 1] == R.v[0:p + 1]"),
    post=("L.o[x] == R.o[y]",),
)
GRID = ("cdiv(q_len, BLOCK_M)",)
