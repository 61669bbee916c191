"""Negative: the dependent-launch flag also selects what the kernel computes (a launch with PDL on would scale
the row another way than one without), so it is no longer a launch option the guard may skip."""
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import CONFIGS, GRID, PARAMS, ROW  # noqa: F401

EXPECT = "subset"


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.jit
def rowscale_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    if PDL:
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        scale = 2.0 if PDL else 1.0  # BUG
        tl.store(y + row * sy + cols, tl.load(x + row * sx + cols, mask=cols < N, other=0.0) * scale, mask=cols < N)
