"""vosti-plugin: bitwise-deterministic serving for vLLM.

vLLM loads `register()` in every process through the `vllm.general_plugins` entry point. It only
teaches vLLM the name `vosti`; nothing changes for users who do not select it.
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["register", "__version__"]


def register() -> None:
    """Idempotent. Attaches vosti's `plugin` patch group (vosti_plugin.vllm.patches) to vLLM."""
    from vosti_plugin.vllm import hooks

    hooks.install()
