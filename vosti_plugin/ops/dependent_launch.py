"""Programmatic dependent launch (PDL): whether a launch may start before the kernel ahead of it in the stream ends.

A kernel that takes the constexpr `PDL` opens its body with

    if PDL:
        tl.extra.cuda.gdc_wait()

and its launch passes `PDL=pdl, launch_pdl=pdl`. Launched so, its programs may be scheduled while the kernel
before it still runs (Hopper and newer), and wait there, before they touch memory, until that kernel has ended and
its writes are visible: the launch latency between two kernels can be hidden, and nothing the kernel computes
changes (the verifier's front end admits `PDL` only as the gate of that first statement and drops it;
`vosti_plugin/verifier/frontend.py`).

Off by default; VOSTI_DEPENDENT_LAUNCH=1 turns it on. H100, session 32: a decode step's layers replayed as one CUDA
graph of vosti's kernels alone (`integration/gpu/pdl_chain.py`) took 3-4 % less time with it on Llama-3.1-8B and
9-12 % less on Qwen3-0.6B, every bit equal, and the four classes stayed bitwise with it on; but through vLLM, where
vLLM's and inductor's kernels sit between vosti's, Llama-3.1-8B decoded at the same speed (0.99-1.02x) and
Qwen3-0.6B 5-14 % slower (`git show 0b2d39a:integration/results/h100-s32/README.md`).
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
    """Whether launches on t's device use PDL: turned on, a CUDA device of compute capability 9+, not the
    interpreter."""
    if os.environ.get(ENV, "0") != "1" or not t.is_cuda or os.environ.get("TRITON_INTERPRET", "0") == "1":
        return False
    return _device_supports(t.device.index if t.device.index is not None else torch.cuda.current_device())
