"""Negative (op identity): the bf16 output is rounded toward zero for large batches, to nearest otherwise."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW

EXPECT = "same-operation"


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def round_by_m_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x + row * sx + cols, mask=cols < N, other=0.0)
        if M > 256:
            h = v.to(tl.bfloat16, fp_downcast_rounding="rtz")  # BUG
        else:
            h = v.to(tl.bfloat16)
        tl.store(y + row * sy + cols, h.to(tl.float32), mask=cols < N)
