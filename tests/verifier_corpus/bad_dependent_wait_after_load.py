"""Negative: the dependent-launch wait comes after the kernel's first load; launched early, the kernel would read
its input before the kernel that writes it has ended."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW  # noqa: F401

EXPECT = "subset"


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def rowscale_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    row = tl.program_id(0).to(tl.int64)  # BUG
    first = tl.load(x + row * sx)
    if PDL:
        tl.extra.cuda.gdc_wait()
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        tl.store(y + row * sy + cols, tl.load(x + row * sx + cols, mask=cols < N, other=0.0) * first, mask=cols < N)
