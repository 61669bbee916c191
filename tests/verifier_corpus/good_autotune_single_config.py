"""Positive (launch): an autotuner with exactly one config (no hooks) is pinned to it and proved."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import GRID, PARAMS, ROW

CONFIGS = [{}]
OBLIGATIONS = {"coverage", "read-equal-region", "int-overflow"}


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["N"])
@triton.jit
def rowcopy_pinned_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        tl.store(y + row * sy + cols, tl.load(x + row * sx + cols, mask=cols < N, other=0.0), mask=cols < N)
