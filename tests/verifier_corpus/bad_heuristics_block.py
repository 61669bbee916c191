"""Negative (launch): @triton.heuristics computes the chunk width from M at run time."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import GRID, PARAMS, ROW

EXPECT = "launch-config"
CONFIGS = [{}]


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.heuristics({"BLOCK": lambda args: 64 if args["M"] > 128 else 256})  # BUG
@triton.jit
def rowsum_heuristic_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        acc += tl.load(x + row * sx + cols, mask=cols < N, other=0.0)
    tl.store(y + row * sy, tl.sum(acc, axis=0))
