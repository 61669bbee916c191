"""Deterministic sampling under vosti: batch-invariant sampler ops, per-request random streams that
survive chunked prefill on CPU, and a per-request refusal for what vosti cannot make deterministic.

`install()` / `uninstall()` (vosti_plugin.sampling.vllm_patches) put the overrides in and take them out;
`vosti_plugin.selection` calls them with the dense ops. What each parameter gets: refusals.py.
"""
from __future__ import annotations

from vosti_plugin.sampling.vllm_patches import install, installed, is_installed, uninstall

__all__ = ["install", "installed", "is_installed", "uninstall"]
