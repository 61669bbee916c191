"""Raw-logit evidence from vLLM outputs and bitwise comparison of it."""
from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class StepLogits:
    token_id: int
    top: tuple[tuple[int, float], ...]   # (token id, raw logit) for the top-k returned by vLLM


def request_view(output) -> tuple[StepLogits, ...]:
    """The per-request view of a vLLM RequestOutput: each emitted token with its top-k raw logits."""
    completion = output.outputs[0]
    steps = []
    for tok, lp in zip(completion.token_ids, completion.logprobs or []):
        top = tuple(sorted(((tid, float(v.logprob)) for tid, v in lp.items()), key=lambda kv: (-kv[1], kv[0])))
        steps.append(StepLogits(int(tok), top))
    if completion.logprobs is None:
        steps = [StepLogits(int(t), ()) for t in completion.token_ids]
    return tuple(steps)


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def bitwise_equal(a: tuple[StepLogits, ...], b: tuple[StepLogits, ...]) -> bool:
    """Definition 2.1: one view is a prefix of the other, compared bit for bit."""
    n = min(len(a), len(b))
    for x, y in zip(a[:n], b[:n]):
        if x.token_id != y.token_id or len(x.top) != len(y.top):
            return False
        for (ti, vi), (tj, vj) in zip(x.top, y.top):
            if ti != tj or _bits(vi) != _bits(vj):
                return False
    return True


def max_abs_diff(a: tuple[StepLogits, ...], b: tuple[StepLogits, ...]) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        dy = dict(y.top)
        for tid, v in x.top:
            if tid in dy:
                worst = max(worst, abs(v - dy[tid]))
    return worst


def first_divergence(a, b) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if not bitwise_equal((x,), (y,)):
            return i
    return None
