"""Per-request decision for every sampling parameter vLLM accepts, checked where vLLM validates a
request (InputProcessor._validate_params, 0.26 and 0.32), so a refused request fails alone with HTTP
400 and the engine keeps serving.

Deterministic under vosti (same prompt, parameters and seed -> same tokens and logprobs, any batch):
  temperature (0 = greedy), top_k, top_p, min_p, presence / frequency / repetition penalties,
  logit_bias, allowed_token_ids, bad_words, min_tokens, stop / stop_token_ids / ignore_eos /
  max_tokens, repetition_detection (stop checks on tokens), n > 1 with a seed (child i is seeded
  seed + i), logprobs and prompt_logprobs in every logprobs mode, structured outputs (the grammar
  bitmask only sets -inf).
Refused (listed in REFUSED, with the reason): parameters whose logits processing vosti has not made
  or verified row-invariant.
Unseeded random sampling (temperature > 0, no seed) is served: its noise is fresh by design, so it is
  outside the guarantee. Set VOSTI_REFUSE_UNSEEDED=1 to refuse it instead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

REFUSE_UNSEEDED_ENV = "VOSTI_REFUSE_UNSEEDED"
_GREEDY_EPS = 1e-5   # vLLM's _SAMPLING_EPS: below it a request is sampled greedily

REFUSED = {
    "watermarking": "watermarking re-weights logits with a keyed green list that vosti has not made "
    "row-invariant",
    "thinking_token_budget": "the thinking-budget logits state is not covered by vosti's sampler ops",
    "prompt_logprob_token_ids": "prompt scoring runs only on vLLM's V2 runner path, which vosti has "
    "not verified",
    # vllm/v1/sample/sampler.py:136 (0.32), :135 (0.26): one such request in a step makes the V1
    # sampler return the listed-token logprobs for *every* request, replacing their top-n.
    "logprob_token_ids": "in vLLM's sampler one request with logprob_token_ids replaces the top-n "
    "logprobs of every other request in its batch",
}


@dataclass(frozen=True)
class Refusal:
    parameter: str
    reason: str

    def message(self) -> str:
        return (
            f"vosti refuses sampling parameter '{self.parameter}': {self.reason}. vosti serves only "
            "requests it can answer bit for bit whatever else the server runs; drop the parameter or "
            "run without --attention-backend vosti"
        )


def _is_set(value) -> bool:
    if value is None or value is False:
        return False
    return len(value) > 0 if isinstance(value, (dict, list, tuple)) else True   # arrays: set when given


def refusals(params) -> list[Refusal]:
    """Every reason to refuse `params` (a vllm SamplingParams); empty when vosti serves it."""
    found = [
        Refusal(name, reason) for name, reason in REFUSED.items() if _is_set(getattr(params, name, None))
    ]
    random = (params.temperature or 0.0) >= _GREEDY_EPS
    if random and params.seed is None and os.environ.get(REFUSE_UNSEEDED_ENV) == "1":
        found.append(
            Refusal("seed", f"random sampling without a seed is not reproducible ({REFUSE_UNSEEDED_ENV}=1)")
        )
    return found


def __getattr__(name: str):
    if name == "SamplingRefused":   # subclasses vLLM's validation error: defined in the vLLM adapter
        from vosti_plugin.vllm.refusal_error import SamplingRefused

        return SamplingRefused
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check(params) -> None:
    """Raise SamplingRefused for the first refused parameter of a SamplingParams (others pass)."""
    from vosti_plugin.vllm import compat
    from vosti_plugin.vllm.refusal_error import SamplingRefused

    if not isinstance(params, compat.sampling_params_class()):
        return
    found = refusals(params)
    if found:
        raise SamplingRefused(found[0])
