"""vosti's messages in vLLM's own log.

vLLM gives its handler and format to the `vllm` logger only (and stops propagation there), so a logger
outside that tree prints nothing in a vLLM process. vosti's logger is a child of it.
"""
from __future__ import annotations

import logging

LOGGER_NAME = "vllm.vosti"


def vosti_logger() -> logging.Logger:
    try:
        from vosti_plugin.vllm.compat import vllm_logger

        return vllm_logger(LOGGER_NAME)
    except Exception:  # vLLM not importable: plain logging
        return logging.getLogger(LOGGER_NAME)
