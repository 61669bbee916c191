"""Programmatic dependent launch (PDL): whether a launch may start before the kernel ahead of it in the stream ends.

A kernel that takes the constexpr `PDL` opens its body with

    if PDL:
        tl.extra.cuda.gdc_wait()

and its launch passes `PDL=pdl, launch_pdl=pdl`. Launched so, its programs may be scheduled while the kernel
before it still runs (Hopper and newer), and wait there, before they touch memory, until that kernel has ended and
its writes are visible: the launch latency between two kernels of a decode step is hidden, and nothing the kernel
computes changes (the verifier's front end admits `PDL` only as the gate of that first statement and drops it;
`vosti_plugin/verifier/frontend.py`). H100, a whole decode step's layers under one CUDA graph
(`integration/gpu/pdl_chain.py`): 3-4 % less time on Llama-3.1-8B and Gemma-3-4B, 7-14 % on the sub-2B models,
every output bit equal.

VOSTI_DEPENDENT_LAUNCH=0 turns it off.
"""
from __future__ import annotations

import functools
import os

import torch

ENV = "VOSTI_DEPENDENT_LAUNCH"
MIN_CAPABILITY = 9   # griddepcontrol is PTX for sm_90 and newer


@functools.cache
def _device_supports(index: int) -> bool:
    return torch.cuda.get_device_capability(index)[0] >= MIN_CAPABILITY


def enabled(t: torch.Tensor) -> bool:
    """Whether launches on t's device use PDL: a CUDA device of compute capability 9+, not the interpreter, not
    turned off."""
    if not t.is_cuda or os.environ.get("TRITON_INTERPRET", "0") == "1" or os.environ.get(ENV, "1") == "0":
        return False
    return _device_supports(t.device.index if t.device.index is not None else torch.cuda.current_device())
