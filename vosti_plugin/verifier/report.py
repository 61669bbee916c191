"""Obligations, per-goal reports, catalog results and their rendering (rich table / JSON)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable


@dataclass(frozen=True)
class Obligation:
    name: str
    line: int
    status: str  # proved | failed | unsupported
    message: str


@dataclass
class ObligationReport:
    kernel: str
    goal: str
    config: dict
    status: str
    obligations: list[Obligation] = field(default_factory=list)
    seconds: float = 0.0
    filename: str = ""

    @property
    def failure(self) -> Obligation | None:
        return next((o for o in self.obligations if o.status != "proved"), None)

    def __str__(self) -> str:
        f = self.failure
        if f is None:
            return f"{self.kernel} [{self.goal}] proved ({len(self.obligations)} obligations)"
        return f"{self.kernel} [{self.goal}] {self.status}: {f.name} at line {f.line}: {f.message}"


@dataclass
class Result:
    kernel: str
    config: dict
    contract: str
    status: str
    obligation: str
    line: int
    message: str
    seconds: float
    cached: bool = False
    source: str = ""
    proved_obligations: int = 0

    @staticmethod
    def from_report(r: ObligationReport, source: str, cached: bool = False) -> "Result":
        f = r.failure
        return Result(r.kernel, r.config, r.goal, r.status, f.name if f else "", f.line if f else 0,
                      f.message if f else "", r.seconds, cached, source,
                      sum(1 for o in r.obligations if o.status == "proved"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _config_str(cfg: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in cfg.items())


def results_table(results: Iterable[Result]):
    from rich.table import Table

    t = Table(title="vosti kernel contracts")
    for col in ("kernel", "config", "contract", "status", "obligation", "line", "seconds", "cached"):
        t.add_column(col)
    style = {"proved": "green", "failed": "red", "unsupported": "yellow"}
    for r in results:
        t.add_row(r.kernel, _config_str(r.config), r.contract, f"[{style.get(r.status, '')}]{r.status}",
                  r.obligation + (f": {r.message}" if r.message else ""), str(r.line or ""),
                  f"{r.seconds:.2f}", "yes" if r.cached else "")
    return t


def results_json(results: Iterable[Result]) -> dict[str, Any]:
    rs = [r.to_dict() for r in results]
    counts: dict[str, int] = {}
    for r in rs:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {"results": rs, "counts": counts, "all_proved": all(r["status"] == "proved" for r in rs)}
