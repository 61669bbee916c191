"""The tensor-parallel all-reduce as an all-gather and a sum in rank order.

A collective library's all-reduce picks its algorithm (ring, tree, one-shot, two-shot), chunking and
channel count from the message size and the topology, so one element of the result is summed in an
order that depends on how many tokens the step carries: the same request gives other bits in another
batch. An all-gather only copies. After it every rank holds every rank's partial, and `fixed_order_sum`
adds them elementwise in rank order (((p0 + p1) + p2) + ...) in float32, rounded once to the input
dtype: element i of the result is a function of element i of each partial, and of nothing else.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

COLLECTIVE = "all-gather + rank-order float32 sum"


def fixed_order_sum(gathered: torch.Tensor) -> torch.Tensor:
    """gathered[r] is rank r's partial; their sum in rank order, accumulated in float32."""
    total = gathered[0].to(torch.float32)
    if total.data_ptr() == gathered[0].data_ptr():
        total = total.clone()
    for rank in range(1, gathered.shape[0]):
        total += gathered[rank].to(torch.float32)
    return total.to(gathered.dtype)


def all_reduce(partial: torch.Tensor, all_gather: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Sum of `partial` over the ranks. `all_gather(t)` concatenates every rank's `t` along dim 0 in
    rank order (vLLM's DeviceCommunicatorBase.all_gather with dim=0)."""
    return fixed_order_sum(all_gather(partial.unsqueeze(0)))
