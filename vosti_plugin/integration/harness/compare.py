"""Bitwise comparison of a worker's evidence pairs (Definition 2.1, through vosti_plugin.integration.evidence)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from vosti_plugin.integration.evidence import bitwise_equal, first_divergence, max_abs_diff

from vosti_plugin.integration.harness.views import decode

CLASS_ORDER = ("batch", "chunk", "prefill_decode", "prefix")
CLASS_TITLES = {"batch": "batch composition", "chunk": "chunked prefill",
                "prefill_decode": "prefill vs decode", "prefix": "prefix reuse"}


@dataclass(frozen=True)
class Comparison:
    cls: str
    case: str
    run: bool
    match: bool | None            # None when the case did not run (e.g. no confirmed cache hit)
    first_divergence: int | None
    max_abs_diff: float
    steps: int
    meta: dict
    not_run_reason: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def compare_pair(pair: dict) -> Comparison:
    a, b = decode(pair["reference"]), decode(pair["variant"])
    if not pair.get("run", True):
        return Comparison(pair["class"], pair["case"], False, None, None, 0.0, len(a), pair["meta"],
                          pair.get("not_run_reason"))
    equal = len(a) == len(b) and len(a) > 0 and bitwise_equal(a, b)
    div = None if equal else (first_divergence(a, b) if bitwise_equal(a, b) is False else min(len(a), len(b)))
    return Comparison(pair["class"], pair["case"], True, equal, div, max_abs_diff(a, b), len(a), pair["meta"])


@dataclass(frozen=True)
class ClassTally:
    matches: int
    compared: int
    not_run: int

    @property
    def rate(self) -> float | None:
        return self.matches / self.compared if self.compared else None


def tally(comparisons: list[Comparison]) -> dict[str, ClassTally]:
    out = {}
    for cls in CLASS_ORDER:
        rows = [c for c in comparisons if c.cls == cls]
        if not rows:
            continue
        ran = [c for c in rows if c.run]
        out[cls] = ClassTally(sum(1 for c in ran if c.match), len(ran), len(rows) - len(ran))
    return out
