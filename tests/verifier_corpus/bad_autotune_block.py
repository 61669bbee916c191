"""Negative (launch): @triton.autotune keyed on M picks the chunk width at run time, so a row's reduction
grouping depends on the batch; verify_kernel refuses the autotuner rather than proving one config."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import GRID, PARAMS, ROW

EXPECT = "launch-config"
CONFIGS = [{}]


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["M"])  # BUG
@triton.jit
def rowsum_autotuned_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        acc += tl.load(x + row * sx + cols, mask=cols < N, other=0.0)
    tl.store(y + row * sy, tl.sum(acc, axis=0))
