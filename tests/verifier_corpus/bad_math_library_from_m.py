"""Negative (op identity): libdevice's exp for large batches, Triton's tl.exp otherwise: two implementations
whose last bits differ."""
import triton
import triton.language as tl
from triton.language.extra import libdevice

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW

EXPECT = "same-operation"


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def exp_by_m_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(x + row * sx + cols, mask=cols < N, other=0.0)
        if M > 256:
            e = libdevice.exp(v)  # BUG
        else:
            e = tl.exp(v)
        tl.store(y + row * sy + cols, e, mask=cols < N)
