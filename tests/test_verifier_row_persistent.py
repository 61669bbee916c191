"""A GEMM whose programs walk row tiles (program (p, n) computes row tiles p, p + P, ... of column tile n, the
shape of integration/gpu/tall_variants.py's `rows-pers` variant): the verifier proves its row invariance with a
witness naming each row's program and loop iteration, and refuses walks that overlap or stop a tile early."""
import dataclasses
import textwrap

import pytest

from vosti_plugin.ops.matmul import _ROW_PRE
from vosti_plugin.verifier.api import verify_kernel
from vosti_plugin.verifier.contracts import contract, contract_of, goal, tensor, tensor_descriptor

SOURCE = textwrap.dedent('''
    @triton.jit
    def row_persistent_kernel(a_desc, b_desc, c_ptr, M, N, K, stride_cm, stride_cn, ROW_PROGRAMS: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_n = tl.program_id(1)
        for tile_m in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M), ROW_PROGRAMS, flatten=True):
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                a = a_desc.load([tile_m * BLOCK_M, k0])
                b = b_desc.load([pid_n * BLOCK_N, k0])
                total = tl.dot(a, b.T, total)
            rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, total.to(c_ptr.dtype.element_ty),
                     mask=(rows < M)[:, None] & (cols < N)[None, :])
''')
SPEC = contract_of(contract(
    params={"a_desc": tensor_descriptor(("M", "K"), ("K", 1), ("BLOCK_M", "BLOCK_K")),
            "b_desc": tensor_descriptor(("N", "K"), ("K", 1), ("BLOCK_N", "BLOCK_K")),
            "c_ptr": tensor(("M", "N"), ("stride_cm", "stride_cn"))},
    grid=("ROW_PROGRAMS", "cdiv(N, BLOCK_N)"),
    verif=[goal("row_invariance", same=("N", "K"),
                pre=_ROW_PRE + ("L.a_desc[x, :] == R.a_desc[0, :]", "L.b_desc[:, :] == R.b_desc[:, :]"),
                post=("L.c_ptr[x, :] == R.c_ptr[0, :]",),
                witness={S: {"pid0": "e0 // BLOCK_M % ROW_PROGRAMS", "pid1": "e1 // BLOCK_N",
                             "tile_m": "e0 // BLOCK_M"} for S in "LR"})],
    bounds=tuple(f"{S}.M + 256 < 2**31" for S in "LR") + tuple(f"(N - 1) * {S}.stride_cn < 2**31" for S in "LR"),
)(lambda: None))
CONFIG = {"ROW_PROGRAMS": 4, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
LOOP = "tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M), ROW_PROGRAMS, flatten=True)"


# the split form the split configs need: one K loop that adds a split's partial to the total at its last block
_ONE_SPLIT_LOOP = """        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([tile_m * BLOCK_M, k0])
            b = b_desc.load([pid_n * BLOCK_N, k0])
            total = tl.dot(a, b.T, total)
"""
_SPLITS_LOOP = """        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([tile_m * BLOCK_M, k0])
            b = b_desc.load([pid_n * BLOCK_N, k0])
            acc = tl.dot(a, b.T, acc)
            if ((k0 + BLOCK_K) % K_PER_SPLIT == 0) or (k0 + BLOCK_K >= K):
                total += acc
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
"""
SPLIT_SOURCE = SOURCE.replace(_ONE_SPLIT_LOOP, _SPLITS_LOOP).replace("M, N, K, stride_cm",
                                                                     "M, N, K, K_PER_SPLIT, stride_cm")
SPLIT_SPEC = dataclasses.replace(SPEC, verif=tuple(dataclasses.replace(g, same=g.same + ("K_PER_SPLIT",))
                                                   for g in SPEC.verif))


@pytest.mark.parametrize("source, spec", [(SOURCE, SPEC), (SPLIT_SOURCE, SPLIT_SPEC)], ids=["one split", "splits"])
def test_a_row_tile_walk_is_proved(source, spec):
    assert verify_kernel(source, spec, CONFIG).status == "proved"


def test_a_split_boundary_that_follows_m_is_refused():
    assert _SPLITS_LOOP in SPLIT_SOURCE and "K_PER_SPLIT, stride_cm" in SPLIT_SOURCE
    mutant = SPLIT_SOURCE.replace("(k0 + BLOCK_K) % K_PER_SPLIT == 0", "(k0 + BLOCK_K) % M == 0")
    assert verify_kernel(mutant, SPLIT_SPEC, CONFIG).status == "failed"


@pytest.mark.parametrize("loop", [
    "tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M), ROW_PROGRAMS - 1, flatten=True)",   # walks overlap
    "tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M) - 1, ROW_PROGRAMS, flatten=True)",   # the last row tile is left
])
def test_a_walk_that_overlaps_or_stops_early_is_refused(loop):
    mutant = SOURCE.replace(LOOP, loop)
    assert mutant != SOURCE
    report = verify_kernel(mutant, SPEC, CONFIG)
    assert report.status == "failed"
    assert {o.name for o in report.obligations if o.status == "failed"} <= {"coverage", "write-race"}
