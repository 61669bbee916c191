"""vosti-plugin: bitwise-deterministic serving for vLLM.

vLLM loads `register()` in every process through the `vllm.general_plugins` entry point. It only
teaches vLLM the name `vosti`; nothing changes for users who do not select it.
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["register", "__version__"]

_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
    from vosti_plugin import hooks_into_vllm

    hooks_into_vllm.install()
    _registered = True
