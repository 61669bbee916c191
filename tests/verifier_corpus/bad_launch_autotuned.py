"""Negative (launch): the wrapper launches an autotuned kernel; the autotuner times candidates keyed on M
and may run a different chunk width for another batch."""
import torch
import triton
import triton.language as tl

from vosti_plugin.verifier.contracts import contract

from tests.verifier_corpus._rows import GRID, PARAMS, ROW

EXPECT = "launch-config"
LAUNCH = True


@contract(params=PARAMS, grid=GRID, verif=[ROW])
@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["M"])
@triton.jit
def rowsum_kernel(x, y, M, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        acc += tl.load(x + row * sx + cols, mask=cols < N, other=0.0)
    tl.store(y + row * sy, tl.sum(acc, axis=0))


def rowsum(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    rowsum_kernel[(x.shape[0],)](x, y, x.shape[0], x.shape[1], x.stride(0), y.stride(0))  # BUG
    return y
