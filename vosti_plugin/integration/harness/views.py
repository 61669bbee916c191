"""Per-request views as raw evidence: vLLM outputs -> evidence.StepLogits -> JSON and back, exactly.

Floats travel as `float.hex()` strings, so the JSON round trip keeps every bit. Each step keeps the
top-k raw logits by rank (vLLM adds the sampled / target token to the dict; an entry ranked below k
is dropped, so prompt rows and sampled rows hold the same k entries)."""
from __future__ import annotations

from vosti_plugin.integration.evidence import StepLogits

View = tuple[StepLogits, ...]


def _top(logprob_dict, k: int) -> tuple[tuple[int, float], ...]:
    entries = [(int(tid), float(lp.logprob)) for tid, lp in logprob_dict.items()
               if lp.rank is None or lp.rank <= k]
    entries.sort(key=lambda kv: (-kv[1], kv[0]))
    return tuple(entries[:k])


def sampled_view(output, k: int) -> View:
    """The request's generated tokens with the top-k raw logits of the step that produced each."""
    c = output.outputs[0]
    if c.logprobs is None:
        raise ValueError("request ran without logprobs; the harness needs SamplingParams(logprobs=k)")
    return tuple(StepLogits(int(t), _top(lp, k)) for t, lp in zip(c.token_ids, c.logprobs))


def prompt_view(output, k: int, start: int = 0) -> View:
    """Rows computed by the prompt's prefill: entry i holds position start + i's top-k raw logits and,
    as token, the prompt token after it (the token that position predicts); up to len(prompt) - 2."""
    rows = output.prompt_logprobs
    if rows is None:
        raise ValueError("request ran without prompt_logprobs")
    ids = output.prompt_token_ids
    return tuple(StepLogits(int(ids[i + 1]), _top(rows[i + 1], k)) for i in range(start, len(ids) - 1))


def encode(view: View) -> list:
    return [[s.token_id, [[tid, v.hex()] for tid, v in s.top]] for s in view]


def decode(data: list) -> View:
    return tuple(StepLogits(int(tok), tuple((int(tid), float.fromhex(h)) for tid, h in top))
                 for tok, top in data)
