"""Launch obligations: named predicates over LaunchFacts with a fix for the user."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from vosti_plugin.launch.facts import LaunchFacts


@dataclass(frozen=True)
class Obligation:
    name: str
    description: str
    fix: str
    evaluate: Callable[[LaunchFacts], "str | None"]   # None when it holds, else why not


@dataclass(frozen=True)
class Failure:
    obligation: str
    reason: str
    fix: str

    def line(self) -> str:
        return f"[{self.obligation}] {self.reason} -> fix: {self.fix}"


class LaunchRefused(RuntimeError):
    """vLLM startup is aborted: the launch is outside what vosti's contracts cover."""

    def __init__(self, failures: list[Failure]):
        self.failures = list(failures)
        lines = "\n  ".join(f.line() for f in self.failures)
        super().__init__(
            f"vosti refused this launch: {len(self.failures)} obligation(s) failed "
            f"(the determinism guarantee would not hold):\n  {lines}"
        )


def evaluate_all(obligations, facts: LaunchFacts) -> list[Failure]:
    failures = []
    for ob in obligations:
        try:
            reason = ob.evaluate(facts)
        except Exception as exc:  # a broken rule must refuse, not pass
            reason = f"check raised {type(exc).__name__}: {exc}"
        if reason:
            failures.append(Failure(ob.name, reason, ob.fix))
    return failures
