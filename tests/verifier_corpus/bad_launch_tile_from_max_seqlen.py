"""Negative (host side): the launch picks the KV tile from the batch's longest sequence and the number of
sequences, so the same row runs a different tile (and reduction grouping) in different batches."""
import torch
import triton
import triton.language as tl

EXPECT = "launch-config"
LAUNCH = True


@triton.jit
def rowsum_kernel(x_ptr, y_ptr, n, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for c in range(0, n, BLOCK_N):
        cols = c + tl.arange(0, BLOCK_N)
        acc += tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


def rowsum(x: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape[0], device=x.device)
    longest = int(seq_lens.max())
    block = 128 if longest > 2048 or seq_lens.shape[0] > 64 else 64
    rowsum_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK_N=block)
    return y
