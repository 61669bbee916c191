"""Deterministic sampling under vosti: batch-invariant sampler ops, per-request random streams that
survive chunked prefill on CPU, and a per-request refusal for what vosti cannot make deterministic.

`install()` / `uninstall()` put the overrides into vLLM and take them out (the `sampling` group of
vosti_plugin.vllm.patches, made in vosti_plugin.vllm.sampling_patches); `vosti_plugin.selection` calls
them with the dense ops. What each parameter gets: refusals.py. This package imports no vLLM itself.
"""
from __future__ import annotations

import contextlib

__all__ = ["install", "installed", "is_installed", "uninstall"]


def install() -> None:
    from vosti_plugin.vllm import sampling_patches

    sampling_patches.install()


def uninstall() -> None:
    from vosti_plugin.vllm import sampling_patches

    sampling_patches.uninstall()


def is_installed() -> bool:
    from vosti_plugin.vllm import sampling_patches

    return sampling_patches.is_installed()


@contextlib.contextmanager
def installed():
    from vosti_plugin.vllm import sampling_patches

    with sampling_patches.installed():
        yield
