"""The seeded-sampling cases (issue #17), one table for every check that uses them: the CPU test
(tests/test_sampling_vllm.py, LLM.generate), the H200 burst through LLM.generate
(integration/gpu/sampling_burst.py) and the burst through `vllm serve` (integration/gpu/serve_sampling_burst.py).

`params` are SamplingParams keyword arguments, which are also the field names of vLLM's OpenAI
completions request (structured outputs as a plain dict). Token ids stay below 512 (the tiny model's
vocabulary), so one table serves the tiny model and the GPU geometries. Cases that need a tokenizer
(strings to match or to ban, a grammar) are marked: the GPU geometries are served without one.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    name: str
    params: dict = field(default_factory=dict)
    needs_tokenizer: bool = False


CASES: tuple[Case, ...] = (
    Case("temperature", dict(temperature=0.9)),
    Case("top_k", dict(temperature=0.9, top_k=50)),
    Case("top_p", dict(temperature=0.9, top_p=0.95)),
    Case("top_k_top_p", dict(temperature=1.0, top_k=50, top_p=0.9)),
    Case("min_p", dict(temperature=0.9, min_p=0.05)),
    Case("penalties", dict(temperature=0.9, presence_penalty=0.5, frequency_penalty=0.5, repetition_penalty=1.2)),
    Case("greedy", dict(temperature=0.0)),
    Case("greedy_repetition_penalty", dict(temperature=0.0, repetition_penalty=1.3)),
    Case("logit_bias", dict(temperature=0.9, logit_bias={7: 4.0, 11: -3.0, 300: 2.5})),
    Case("allowed_token_ids", dict(temperature=0.9, allowed_token_ids=list(range(40, 400)))),
    Case("min_tokens_stop_ids", dict(temperature=0.9, min_tokens=2, stop_token_ids=[100, 101, 102, 103],
                                     ignore_eos=False)),
    Case("logprobs_20", dict(temperature=0.9, top_k=50, logprobs=20)),
    Case("prompt_logprobs", dict(temperature=0.9, top_p=0.95, prompt_logprobs=5)),
    Case("n2", dict(temperature=0.9, n=2)),
    Case("bad_words", dict(temperature=0.9, bad_words=["the", " fox"]), needs_tokenizer=True),
    Case("stop_string", dict(temperature=0.9, stop=["e"]), needs_tokenizer=True),
    Case("structured_regex", dict(temperature=0.9, structured_outputs={"regex": "[a-z ]{4,12}"}),
         needs_tokenizer=True),
)
DEFAULT_LOGPROBS = 5   # every case returns logprobs, so every comparison sees them


def cases(*, tokenizer: bool = True) -> dict[str, Case]:
    return {c.name: c for c in CASES if tokenizer or not c.needs_tokenizer}


def sampling_params(case: Case, *, seed: int, max_tokens: int, ignore_eos: bool = False, **extra):
    """vllm.SamplingParams for one request of `case` (logprobs DEFAULT_LOGPROBS unless the case sets them)."""
    from vllm import SamplingParams

    kw = {"logprobs": DEFAULT_LOGPROBS, "ignore_eos": ignore_eos, **case.params, **extra}
    if isinstance(kw.get("structured_outputs"), dict):
        from vllm.sampling_params import StructuredOutputsParams

        kw["structured_outputs"] = StructuredOutputsParams(**kw["structured_outputs"])
    return SamplingParams(seed=seed, max_tokens=max_tokens, **kw)


def completion_body(case: Case, *, model: str, prompt: list[int], seed: int, max_tokens: int) -> dict:
    """An OpenAI /v1/completions body (vLLM's extra fields) for one request of `case`; tokens come back
    as ids, so no tokenizer is needed."""
    body = {"model": model, "prompt": prompt, "seed": seed, "max_tokens": max_tokens, "ignore_eos": True,
            "logprobs": DEFAULT_LOGPROBS, "return_tokens_as_token_ids": True, "return_token_ids": True,
            **case.params}
    if "logit_bias" in body:
        body["logit_bias"] = {str(t): v for t, v in body["logit_bias"].items()}
    return body
