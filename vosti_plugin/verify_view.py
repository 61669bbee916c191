"""What `vosti verify` prints: the kernel catalog per family (or every row), the launch check causes first,
and the one-line summaries."""
from __future__ import annotations

import inspect
from collections import Counter, defaultdict
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

LAUNCH_FAMILY = "launch"     # the verifier's host-side rows: launch:<module>, one per kernel module
STYLE = {"proved": "green", "failed": "red", "unsupported": "yellow"}


def known_kernels() -> dict[str, list[str]]:
    """family -> names `--kernel` can select: the catalog's kernels, and launch:<module> per kernel module."""
    from vosti_plugin.verifier.api import catalog_entries

    families: dict[str, list[str]] = {}
    modules: list[str] = []
    for entry in catalog_entries():
        families.setdefault(entry["family"], []).append(entry["kernel"].fn.__name__)
        stem = Path(inspect.getsourcefile(entry["kernel"].fn)).stem
        if f"launch:{stem}" not in modules:
            modules.append(f"launch:{stem}")
    families[LAUNCH_FAMILY] = modules
    return families


def known_kernels_text() -> str:
    return "; ".join(f"{fam}: {', '.join(names)}" for fam, names in known_kernels().items())


def matches_a_kernel(selector: str) -> bool:
    """The verifier's own selection rule: a part of a kernel name, or a family name."""
    return any(selector in name or selector == fam for fam, names in known_kernels().items() for name in names)


def family_of() -> dict[str, str]:
    return {name: fam for fam, names in known_kernels().items() for name in names}


def _config_str(cfg: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in cfg.items())


def _rows_table(results, title: str) -> Table:
    t = Table(title=title)
    for col in ("kernel", "config", "contract", "status", "obligation", "line", "seconds", "cached"):
        t.add_column(col)
    for r in results:
        t.add_row(escape(r.kernel), escape(_config_str(r.config)), escape(r.contract),
                  f"[{STYLE.get(r.status, '')}]{r.status}",
                  escape(r.obligation + (f": {r.message}" if r.message else "")), str(r.line or ""),
                  f"{r.seconds:.2f}", "yes" if r.cached else "")
    return t


def family_table(results, family_of: dict[str, str]) -> Table:
    groups: dict[str, list] = defaultdict(list)
    for r in results:
        groups[family_of.get(r.kernel, LAUNCH_FAMILY if r.kernel.startswith("launch:") else r.kernel)].append(r)
    t = Table(title="vosti kernel contracts, per kernel family (--all: every row)")
    for col in ("family", "kernels", "contracts", "kernel x config x contract", "proved", "not proved", "proof s",
                "cached"):
        t.add_column(col, justify="left" if col == "family" else "right")
    order = list(family_of.values())
    for fam, rs in sorted(groups.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)):
        bad = sum(r.status != "proved" for r in rs)
        t.add_row(escape(fam), str(len({r.kernel for r in rs})), str(len({r.contract for r in rs})),
                  str(len(rs)), f"[green]{len(rs) - bad}", f"[red]{bad}" if bad else "0",
                  f"{sum(r.seconds for r in rs):.1f}", f"{sum(r.cached for r in rs)}/{len(rs)}")
    return t


def print_results(out: Console, results, family_of: dict[str, str], every_row: bool) -> None:
    if every_row:
        out.print(_rows_table(results, "vosti kernel contracts"))
        return
    out.print(family_table(results, family_of))
    bad = [r for r in results if r.status != "proved"]
    if bad:
        out.print(_rows_table(bad, f"not proved ({len(bad)} rows)"))


def results_summary(results) -> str:
    counts = Counter(r.status for r in results)
    parts = [f"{counts.pop('proved', 0)} proved", f"{counts.pop('failed', 0)} failed"]
    parts += [f"{n} {status}" for status, n in sorted(counts.items())]
    cached = sum(r.cached for r in results)
    return f"kernel contracts: {', '.join(parts)} of {len(results)} ({cached} from cache)"


def print_launch_check(out: Console, model: str, facts, statuses) -> None:
    """Each cause with its fix first (what follows from it beneath), then every obligation's status."""
    causes = [st for st in statuses if st.cause]
    if (facts.extra or {}).get("text_tower"):
        out.print(escape(f"note: {facts.extra['text_tower']}"), highlight=False)
    for i, st in enumerate(causes, 1):
        out.print(f"[red]cause {i}/{len(causes)}[/] " + escape(f"[{st.name}] {st.reason}"), highlight=False)
        out.print(escape(f"  fix: {st.fix}"), highlight=False)
        derived = [d.name for d in statuses if d.follows_from == st.name]
        if derived:
            out.print(escape(f"  follows from it: {', '.join(derived)}"), highlight=False)
    table = Table(title=escape(f"launch obligations for {model} ({facts.dtype}, page {facts.page_size})"))
    for col in ("obligation", "status", "detail"):
        table.add_column(col)
    for st in statuses:
        if st.ok:
            table.add_row(escape(st.name), "[green]holds[/]", escape(st.description))
        elif st.cause:
            table.add_row(escape(st.name), "[red]FAILED[/]", escape(st.reason))
        else:
            table.add_row(escape(st.name), f"[yellow]follows from {escape(st.follows_from)}[/]", escape(st.reason))
    out.print(table)


def launch_summary(statuses) -> str:
    causes = [st.name for st in statuses if st.cause]
    held = sum(st.ok for st in statuses)
    if not causes:
        return f"launch check: accepted ({held}/{len(statuses)} obligations hold)"
    derived = sum(1 for st in statuses if not st.ok and not st.cause)
    return (f"launch check: refused, {len(causes)} cause{'s' if len(causes) != 1 else ''} "
            f"({', '.join(causes)}) and {derived} failure(s) that follow from them")
