"""vLLM's tensor-parallel all-reduce under vosti: `GroupCoordinator._all_reduce_out_place` (the one
place both the eager call and the `vllm.all_reduce` custom op reach) -> an all-gather through the
group's own device communicator and a sum in rank order (vosti_plugin.parallel.fixed_order)."""
from __future__ import annotations

import functools

from vosti_plugin.parallel import fixed_order


def all_reduce_out_place(stock):
    @functools.wraps(stock)
    def _all_reduce_out_place(self, input_):
        communicator = getattr(self, "device_communicator", None)
        if communicator is None or getattr(self, "world_size", 1) == 1:
            return stock(self, input_)
        return fixed_order.all_reduce(input_, lambda t: communicator.all_gather(t, dim=0))

    return _all_reduce_out_place
