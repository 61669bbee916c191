"""Launch obligations: named predicates over LaunchFacts, each refusal with the fix for its cause.

An obligation that reads facts another obligation judges (the attention page size reads the dtype and
the head size) names it in `after`. When that one fails too, the dependent failure is judged again as if
the upstream fix were applied: if it then holds, it only follows from the upstream cause and is folded
under it; if it still fails, it is a cause of its own, reported with the fix that holds once the upstream
fix is applied as well.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

from vosti_plugin.launch.facts import LaunchFacts

NOT_SUPPORTED_YET = "this model's geometry is not supported yet: "


@dataclass(frozen=True)
class Refusal:
    """Why an obligation does not hold, with the fix that addresses exactly that reason."""

    reason: str
    fix: str | None = None                        # None: the obligation's own fix text
    fix_args: tuple[str, ...] = ()                # vLLM arguments that apply the fix, e.g. ("--dtype", "float32")
    fixed: dict = field(default_factory=dict)     # LaunchFacts fields as the fix leaves them


@dataclass(frozen=True)
class Obligation:
    name: str
    description: str
    fix: str
    evaluate: Callable[[LaunchFacts], "str | Refusal | None"]   # None when it holds
    after: tuple[str, ...] = ()    # obligations judging facts this one reads too


@dataclass(frozen=True)
class Failure:
    obligation: str
    reason: str
    fix: str
    fix_args: tuple[str, ...] = ()
    fixed: dict = field(default_factory=dict)
    derived: tuple["Failure", ...] = ()     # failures that follow from this one and go away with its fix

    def line(self) -> str:
        return f"[{self.obligation}] {self.reason} -> fix: {self.fix}"

    def lines(self) -> list[str]:
        out = [self.line()]
        if self.derived:
            out.append("    follows from it:")
            out += [f"      [{d.obligation}] {d.reason}" for d in self.derived]
        return out

    def with_derived(self, failure: "Failure") -> "Failure":
        return dataclasses.replace(self, derived=self.derived + (failure,))


class LaunchRefused(RuntimeError):
    """vLLM startup is aborted: the launch is outside what vosti's contracts cover."""

    def __init__(self, failures: list[Failure]):
        self.failures = list(failures)
        body = "\n  ".join(line for f in self.failures for line in f.lines())
        n = len(self.failures)
        super().__init__(
            f"vosti refused this launch: {n} cause{'s' if n != 1 else ''} "
            f"(the determinism guarantee would not hold):\n  {body}"
        )


def judge(ob: Obligation, facts: LaunchFacts) -> Refusal | None:
    try:
        verdict = ob.evaluate(facts)
    except Exception as exc:  # a broken rule must refuse, not pass
        verdict = f"check raised {type(exc).__name__}: {exc}"
    if not verdict:
        return None
    return verdict if isinstance(verdict, Refusal) else Refusal(str(verdict))


def _failure(ob: Obligation, refusal: Refusal) -> Failure:
    return Failure(ob.name, refusal.reason, refusal.fix or ob.fix, tuple(refusal.fix_args), dict(refusal.fixed))


def facts_with_fixes(facts: LaunchFacts, failures) -> LaunchFacts | None:
    """The facts as every given failure's fix leaves them; None when one of them has no such fix."""
    changes: dict = {}
    for f in failures:
        if not f.fixed:
            return None
        changes.update(f.fixed)
    return dataclasses.replace(facts, **changes)


def _primary_cause(ob: Obligation, facts: LaunchFacts, causes: list[Failure], upstream: list[int]) -> int:
    """The upstream cause a derived failure is listed under: the first whose fix it cannot do without
    (the others' fixes alone leave it failing); else the first."""
    for i in upstream:
        fixed = facts_with_fixes(facts, [causes[j] for j in upstream if j != i])
        if fixed is not None and judge(ob, fixed) is not None:
            return i
    return upstream[0]


def evaluate_all(obligations, facts: LaunchFacts) -> list[Failure]:
    """One Failure per cause, in obligation order; failures that follow from a cause are in its `derived`."""
    causes: list[Failure] = []
    causes_of: dict[str, list[int]] = {}          # failed obligation -> the causes its failure comes from
    for ob in obligations:
        refusal = judge(ob, facts)
        if refusal is None:
            continue
        upstream = sorted({i for name in ob.after for i in causes_of.get(name, ())})
        if upstream:
            fixed = facts_with_fixes(facts, [causes[i] for i in upstream])
            own = judge(ob, fixed) if fixed is not None else None
            if own is None:
                derived = _failure(ob, refusal)
                primary = _primary_cause(ob, facts, causes, upstream)
                if len(upstream) > 1:
                    others = ", ".join(causes[i].obligation for i in upstream if i != primary)
                    derived = dataclasses.replace(derived, reason=f"{derived.reason} (needs the fix of {others} too)")
                causes[primary] = causes[primary].with_derived(derived)
                causes_of[ob.name] = upstream
                continue
            refusal = own
        causes.append(_failure(ob, refusal))
        causes_of[ob.name] = upstream + [len(causes) - 1]
    return causes


def every_failure(causes) -> list[tuple[Failure, str | None]]:
    """(failure, the cause it follows from or None) for the causes and everything folded under them."""
    out: list[tuple[Failure, str | None]] = []
    for c in causes:
        out.append((c, None))
        out += [(d, c.obligation) for d in c.derived]
    return out
