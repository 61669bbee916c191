"""The error a refused request raises: a ValueError and vLLM's own validation error (HTTP 400)."""
from __future__ import annotations

from vosti_plugin.sampling.refusals import Refusal
from vosti_plugin.vllm import compat


class SamplingRefused(compat.validation_error_base(), ValueError):
    """A request vosti will not serve; a ValueError (and vLLM's validation error) -> HTTP 400."""

    def __init__(self, refusal: Refusal) -> None:
        base = compat.validation_error_base()
        if base is ValueError:
            ValueError.__init__(self, refusal.message())
        else:
            base.__init__(self, refusal.message(), parameter=refusal.parameter)
        self.refusal = refusal
