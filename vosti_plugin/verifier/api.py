"""Public API of the kernel verifier.

    verify_kernel(kernel, contract, config)   one kernel x one config x its goal(s) -> ObligationReport
    verify_catalog(kernel=None, cache_dir=None, progress=None) -> list[Result]
        every shipped kernel x every config of its catalog x its goals, cached by source hash + config
    verify_configs(wanted) -> list[Result]: only the proofs one deployment's launch configs need (same cache)
    catalog_plan(kernel=None) -> (groups, rejected rows): the proof work verify_catalog does
    results_table(results) / results_json(results)
    proved_configs() -> [(family, config items)] of the catalog configs whose every goal is proved

Configs that differ only in constexprs the contract keeps symbolic share one proof (the Z3 queries range
over all their values), so the unit of work is a group: kernel x goal x values of the other constexprs.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import inspect
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from vosti_plugin.verifier import ir
from vosti_plugin.verifier.check import check_goal
from vosti_plugin.verifier.contracts import Contract, Goal, contract_of
from vosti_plugin.verifier.frontend import Unsupported, kernel_from_function, kernel_from_source
from vosti_plugin.verifier.report import Obligation, ObligationReport, Result, results_json, results_table

__all__ = ["verify_kernel", "verify_catalog", "verify_configs", "results_table", "results_json", "proved_configs", "Result",
           "ObligationReport", "default_cache_dir", "catalog_entries", "catalog_plan", "Group", "wants"]

VERSION = "1"


def default_cache_dir() -> Path:
    env = os.environ.get("VOSTI_CACHE_DIR")
    base = Path(env) if env else Path.home() / ".cache" / "vosti"
    return base / "verifier"


def _ir_of(kernel_fn_or_source: Any) -> ir.Kernel:
    if isinstance(kernel_fn_or_source, str):
        return kernel_from_source(kernel_fn_or_source)
    return kernel_from_function(kernel_fn_or_source)


def verify_kernel(kernel_fn_or_source: Any, contract: Contract | Goal | None = None, config: dict | None = None,
                  *, goal: str | None = None, domain: list[dict] | None = None) -> ObligationReport:
    """Verify one kernel under one config. `contract` defaults to the kernel's `@contract`; a Goal checks
    that goal only (with the kernel's contract for params/grid); with several goals all are checked and
    the report is the first that is not proved (or the last)."""
    config = dict(config or {})
    tuner = _tuner_of(kernel_fn_or_source)
    if tuner is not None:
        spec = contract if isinstance(contract, Contract) else contract_of(kernel_fn_or_source)
        pinned = _pinned_config(kernel_fn_or_source, tuner, config)
        if isinstance(pinned, ObligationReport):
            return pinned
        config, kernel_fn_or_source = pinned, kernel_fn_or_source.fn
        if spec is not None and contract is None:
            contract = spec
    spec = contract if isinstance(contract, Contract) else None
    if spec is None and not isinstance(kernel_fn_or_source, str):
        spec = contract_of(kernel_fn_or_source)
    if spec is None:
        raise ValueError("no contract: pass one or decorate the kernel with @contract")
    goals = [contract] if isinstance(contract, Goal) else [g for g in spec.verif if goal in (None, g.name)
                                                           and (goal is not None or g.applies(config))]
    try:
        k = _ir_of(kernel_fn_or_source)
    except Unsupported as u:
        name = getattr(getattr(kernel_fn_or_source, "fn", kernel_fn_or_source), "__name__", u.kernel)
        return ObligationReport(name, goals[0].name if goals else "", config, "unsupported",
                                [Obligation("subset", u.line, "unsupported", u.what)], 0.0, u.filename)
    report = None
    for g in goals:
        report = check_goal(k, spec, g, config, domain=domain)
        if report.status != "proved":
            return report
    assert report is not None
    return report


def _tuner_of(kernel: Any) -> str | None:
    """'autotune' / 'heuristics' for a kernel wrapped by @triton.autotune / @triton.heuristics."""
    name = type(kernel).__name__
    if name == "Autotuner" or (hasattr(kernel, "configs") and hasattr(kernel, "fn") and hasattr(kernel, "keys")):
        return "autotune"
    if name == "Heuristics" or (hasattr(kernel, "values") and hasattr(kernel, "fn") and callable(
            getattr(kernel, "run", None)) and not hasattr(kernel, "src")):
        return "heuristics"
    return None


def _pinned_config(kernel: Any, tuner: str, config: dict) -> dict | ObligationReport:
    """The one config an autotuner can choose, merged into `config`, or a refusal: a proof holds for one
    config, and an autotuner or heuristic chooses among several at run time from the arguments."""
    inner = kernel.fn
    while _tuner_of(inner) is not None:  # stacked decorators: refuse if any layer chooses
        return _refusal(kernel, config, "stacked @triton.autotune / @triton.heuristics")
    name = getattr(getattr(inner, "fn", inner), "__name__", "kernel")
    if tuner == "autotune":
        configs = list(getattr(kernel, "configs", []))
        hooks = any(getattr(kernel, h, False) for h in ("user_defined_pre_hook", "user_defined_post_hook")) or \
            any(getattr(c, "pre_hook", None) for c in configs) or getattr(kernel, "reset_to_zero", None) or \
            getattr(kernel, "restore_value", None)
        if len(configs) == 1 and not hooks:
            fixed = dict(configs[0].kwargs)
            clash = {k: (v, config[k]) for k, v in fixed.items() if k in config and config[k] != v}
            if clash:
                return _refusal(kernel, config, f"the autotuner's only config sets {clash} differently from the "
                                                f"config to verify")
            return {**config, **fixed}
        return _refusal(kernel, config, f"{name} is wrapped in @triton.autotune with {len(configs)} configs keyed on "
                                        f"{list(getattr(kernel, 'keys', []))}: the config is chosen at run time, so "
                                        f"two launches may run different configs (pin one config: a single "
                                        f"triton.Config without hooks, or remove the autotuner)")
    return _refusal(kernel, config, f"{name} is wrapped in @triton.heuristics for "
                                    f"{sorted(getattr(kernel, 'values', {}))}: those constexprs are computed at run "
                                    f"time from the arguments (pass them at the launch instead)")


def _refusal(kernel: Any, config: dict, why: str) -> ObligationReport:
    inner = kernel
    while hasattr(inner, "fn") and not hasattr(inner, "src"):
        inner = inner.fn
    py = getattr(inner, "fn", inner)
    try:
        lines, line = inspect.getsourcelines(py)
        filename = inspect.getsourcefile(py) or ""
        line += next((i for i, t in enumerate(lines) if "autotune" in t or "heuristics" in t), 0)  # the decorator
    except (OSError, TypeError):
        line, filename = 0, ""
    return ObligationReport(getattr(py, "__name__", "kernel"), "", config, "failed",
                            [Obligation("launch-config", line, "failed", why)], 0.0, filename)


# -- catalog -------------------------------------------------------------------------------------------


CATALOG_REGISTRY = "vosti_plugin.kernel_catalog"  # module whose KERNEL_MODULES lists the catalog's modules
# environment switches that change what the catalog lists (its stored verification is kept per value)
CATALOG_SWITCHES = ("VOSTI_DECODE_TILE_ROWS", "VOSTI_ATTENTION_ROW_SUMS", "VOSTI_PREFILL_FUSED_FROM")
# switches whose every positive value lists the same catalog (a token threshold: on, off, or unset: by geometry)
_ON_OFF_SWITCHES = ("VOSTI_PREFILL_FUSED_FROM",)


def _switch_value(name: str) -> str:
    value = os.environ.get(name, "").strip().lower()
    if name in _ON_OFF_SWITCHES and value:
        return "on" if value.isdigit() and int(value) > 0 else "off"
    return value   # unset differs from "0" and "sum": each geometry then picks its own (attention.config)


def catalog_modules() -> tuple[str, ...]:
    """The kernel modules of the catalog: each exports verifier_catalog() (VOSTI_KERNEL_CATALOG names another
    registry module)."""
    import importlib

    return tuple(importlib.import_module(os.environ.get("VOSTI_KERNEL_CATALOG", CATALOG_REGISTRY)).KERNEL_MODULES)


def catalog_entries() -> list[dict]:
    """Every kernel module's verifier_catalog(), built once per process for each VOSTI_* environment (the
    registry, the catalog's switches): a build lists about 33,000 configs (2-3 s on 2 cores). Read only."""
    return _catalog_in(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("VOSTI_"))))


@functools.lru_cache(maxsize=1)   # forked workers inherit it
def _catalog_in(vosti_env: tuple) -> list[dict]:
    import importlib

    del vosti_env   # the key: the catalog modules read it from os.environ
    return [e for m in catalog_modules() for e in importlib.import_module(m).verifier_catalog()]


def _referenced(k: ir.Kernel) -> set[str]:
    names: set[str] = set()

    def walk(x: Any) -> None:
        if isinstance(x, ir.Name):
            names.add(x.id)
        if isinstance(x, tuple):
            for y in x:
                walk(y)
        elif hasattr(x, "__dataclass_fields__"):
            for f in x.__dataclass_fields__:
                walk(getattr(x, f))

    walk(k.body)
    return names


def _source_hash(kernel: Any, spec: Contract) -> str:
    """Cache key of one kernel's proofs: its module and every first-party module it imports (jit helpers,
    constants), the proof code and the contract (see vosti_plugin/verifier/fingerprint.py for why this is complete)."""
    from vosti_plugin.verifier import fingerprint

    py = getattr(kernel, "fn", kernel)
    return hashlib.sha256("|".join((VERSION, fingerprint.digest((py.__module__,)), fingerprint.verifier_digest(),
                                    py.__name__, repr(spec))).encode()).hexdigest()[:24]


def _groups(entry: dict, k: ir.Kernel, spec: Contract) -> list[tuple[dict, list[tuple[dict, dict]]]]:
    keyed = (_referenced(k) | _spec_names(spec)) - set(spec.symbolic)
    groups: dict[str, tuple[dict, list]] = {}
    for cfg, fam in entry["configs"]:
        key = {n: v for n, v in sorted(cfg.items()) if n in keyed}
        gk = json.dumps(key, sort_keys=True, default=str)
        groups.setdefault(gk, (key, []))[1].append((cfg, fam))
    return list(groups.values())


def _spec_names(spec: Contract) -> set[str]:
    text = " ".join(spec.grid) + " " + " ".join(t for g in spec.verif for t in g.pre + g.post)
    return {w for w in text.replace("(", " ").replace(")", " ").replace(",", " ").split() if w.isidentifier()}


_PARSED: dict[Any, ir.Kernel] = {}  # per process: kernel function -> its IR (catalog_plan fills it before workers fork)


def _run_group(task: tuple) -> dict:
    """Worker: verify one (kernel, goal, group); returns a JSON-able summary."""
    entry_index, goal_index, key, domain, first = task[:5]
    right = task[5] if len(task) > 5 else None  # a cross-config goal: the right launch's constexprs
    t0 = time.perf_counter()
    kernel = catalog_entries()[entry_index]["kernel"]
    spec = contract_of(kernel)
    g = spec.verif[goal_index]
    try:
        k = _PARSED.get(kernel.fn)
        if k is None:
            k = _PARSED[kernel.fn] = kernel_from_function(kernel)
        rep = check_goal(k, spec, g, {**first, **key}, domain=domain or None, right_config=right)
    except Unsupported as u:
        rep = ObligationReport(kernel.fn.__name__, g.name, key, "unsupported",
                               [Obligation("subset", u.line, "unsupported", u.what)], 0.0)
    f = rep.failure
    return {"status": rep.status, "obligation": f.name if f else "", "line": f.line if f else 0,
            "message": f.message if f else "", "seconds": time.perf_counter() - t0,
            "proved": sum(1 for o in rep.obligations if o.status == "proved")}


def _fingerprint(kernel: str | None) -> str | None:
    """Hash of everything the catalog's results depend on: the catalog's kernel modules and what they import,
    the registry naming them, the proof code (vosti_plugin/verifier/fingerprint.py), computed without importing the kernel
    modules (importing them pulls in torch, which alone takes seconds)."""
    from vosti_plugin.verifier import fingerprint

    try:
        modules = catalog_modules()
    except ImportError:
        return None
    registry = os.environ.get("VOSTI_KERNEL_CATALOG", CATALOG_REGISTRY)
    switches = [_switch_value(name) for name in CATALOG_SWITCHES]
    return fingerprint.digest(modules + (registry, "vosti_plugin.verifier.api"), VERSION, str(kernel),
                              os.environ.get("TRITON_INTERPRET", ""), *switches)[:32]


def verify_catalog(*, kernel: str | None = None, cache_dir: Path | None = None,
                   progress: Callable[[Result], None] | None = None, workers: int | None = None) -> list[Result]:
    """Every shipped kernel x every config in its catalog x its goals (results cached on disk)."""
    cache_dir = _ready(cache_dir)
    fp = _fingerprint(kernel)
    return _stored_rows(cache_dir / f"catalog-{fp}.json" if fp else None,
                        lambda: _verify_catalog(kernel, cache_dir, progress, workers), progress)


def _ready(cache_dir: Path | None) -> Path:
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    return cache_dir


def _read_rows(path: Path) -> list[Result]:
    return [Result(**{**d, "cached": True, "seconds": 0.0}) for d in json.loads(path.read_text())]


def _stored_rows(path: Path | None, compute: Callable[[], list[Result]],
                 progress: Callable[[Result], None] | None = None) -> list[Result]:
    """The rows stored at `path` (each passed to progress), or compute() stored there (path None: the
    sources cannot be fingerprinted)."""
    if path is not None and path.exists():
        rows = _read_rows(path)
        for r in rows if progress else ():
            progress(r)
        return rows
    results = compute()
    if path is not None:
        _write_atomic(path, json.dumps([r.to_dict() for r in results], default=str))
    return results


@dataclass(frozen=True)
class Group:
    """One unit of proof work: a kernel x goal x values of its non-symbolic constexprs; one Z3 proof covers
    every member config (the symbolic constexprs range over `domain`)."""

    kernel: str
    family: str
    goal: str
    members: list  # [(constexpr config, launch-config family fields)]
    source: str  # file:line of the kernel
    cache_key: str
    task: tuple  # what _run_group needs (picklable)
    kernel_lines: int = 0  # source lines of the kernel: the larger kernels' proofs take longest


Wanted = dict  # family -> set of (launch config: sorted (field, value) items, pins: sorted (name, values)); see wants()


def wants(wanted: Wanted | None, family: str, cfg: dict, fam: dict) -> bool:
    """Does a deployment that wants `wanted` launch the catalog's constexpr config `cfg` (of launch config `fam`)?
    Every config of a family `wanted` does not name; of one it names, those of a wanted launch config whose
    constexprs take one of the values the item's pins allow (what the deployment's geometry fixes: its head dim,
    page size, soft cap, ...; a pin the config does not take is no constraint)."""
    if wanted is None or family not in wanted:
        return True
    items = tuple(sorted(fam.items()))
    return any(items == launch and all(name not in cfg or cfg[name] in values for name, values in pins)
               for launch, pins in wanted[family])


def catalog_plan(kernel: str | None = None, wanted: Wanted | None = None) -> tuple[list[Group], list[Result]]:
    """The groups a catalog verification proves, and the rows of kernels outside the subset.  With `wanted`,
    only what one deployment needs: of a family it names, the configs it launches (wants()), so each group's
    proof ranges over that deployment's symbolic values only; of every other family, all groups."""
    groups: list[Group] = []
    rejected: list[Result] = []
    for ei, entry in enumerate(catalog_entries()):
        kern = entry["kernel"]
        name = kern.fn.__name__
        if kernel is not None and kernel not in name and kernel != entry["family"]:
            continue
        spec = contract_of(kern)
        lines, line = inspect.getsourcelines(kern.fn)
        src = f"{inspect.getsourcefile(kern.fn)}:{line}"
        if spec is None:
            rejected += [Result(name, cfg, "*", "failed", "contract", line,
                                "no @contract(...) above the kernel's @triton.jit", 0.0, False, src)
                         for cfg, _fam in entry["configs"]]
            continue
        try:
            k = _PARSED[kern.fn] = kernel_from_function(kern)
        except Unsupported as u:
            rejected += [Result(name, cfg, "*", "unsupported", "subset", u.line, u.what, 0.0, False, src)
                         for cfg, _fam in entry["configs"]]
            continue
        shash = _source_hash(kern, spec)
        cross_only = {tuple(sorted(pair[0].items())) for pair in entry.get("cross", ())} \
            if entry.get("cross_only") else set()
        by_key = _groups(entry, k, spec)
        for gi, g in enumerate(spec.verif):
            for key, members in by_key:
                members = [(c, f) for c, f in members if g.applies(c) and wants(wanted, entry["family"], c, f)
                           and not (g.across and cross_only and tuple(sorted(c.items())) in cross_only)]
                if not members:
                    continue
                distinct = {json.dumps(d, sort_keys=True): d for d in
                            ({n: c[n] for n in spec.symbolic if n in c} for c, _ in members) if d}
                domain = [distinct[k] for k in sorted(distinct)]
                ck = hashlib.sha256(json.dumps([shash, g.name, key, domain], sort_keys=True,
                                               default=str).encode()).hexdigest()[:32]
                groups.append(Group(name, entry["family"], g.name, members, src, ck,
                                    (ei, gi, key, domain, members[0][0]), len(lines)))
            if g.across:
                groups += _cross_groups(entry, ei, g, gi, spec, shash, src, wanted, len(lines))
    return groups, rejected


# Symbolic value tuples one cross-config proof covers at most, unless the catalog entry's "cross_chunk"(group
# key) says how many (None: the whole domain in one proof): Z3's time over a domain can grow faster than the domain.
_CROSS_DOMAIN_CHUNK = 64


def _cross_groups(entry: dict, ei: int, g, gi: int, spec: Contract, shash: str, src: str,
                  wanted: Wanted | None, kernel_lines: int = 0) -> list[Group]:
    """The goal proved across the entry's `cross` pairs: (left config, right config, left's launch-config
    fields[, the config the row is recorded for]), two launches of this kernel that one deployment runs for the
    same rows (two tile shapes, or two launch modes chained by the goal). The row is the left config's (or the
    pair's fourth item's: a launched config whose proof goes through a verification-only left config), under the
    goal's name + " across"; so that config counts as proved only with it. Pairs whose non-symbolic constexprs
    agree on each side are one group, one proof over their symbolic values."""
    sym = set(spec.symbolic)
    by_key: dict[str, tuple[dict, dict, list, list]] = {}
    for pair in entry.get("cross", ()):
        left, right, fam = pair[:3]
        if not g.applies(left) or not g.applies_right(right):
            continue
        if not wants(wanted, entry["family"], pair[3] if len(pair) > 3 else left, fam):
            continue
        concrete = [{n: v for n, v in sorted(c.items()) if n not in sym} for c in (left, right)]
        gk = json.dumps(concrete, sort_keys=True, default=str)
        group = by_key.setdefault(gk, (concrete[0], right, [], []))
        group[2].append((pair[3] if len(pair) > 3 else left, fam))
        group[3].append(left)
    out = []
    for key, right, members, lefts in by_key.values():
        by_domain: dict[str, list] = {}   # the members of each symbolic value tuple
        for member, left in zip(members, lefts):
            d = {n: left[n] for n in spec.symbolic if n in left}
            _d, of_domain, lefts_of_domain = by_domain.setdefault(json.dumps(d, sort_keys=True), [d, [], []])
            of_domain.append(member)
            lefts_of_domain.append(left)
        keys = sorted(by_domain)
        size = entry.get("cross_chunk", lambda _key: _CROSS_DOMAIN_CHUNK)(key) or len(keys)
        for start in range(0, len(keys), size):
            chunk = [by_domain[k] for k in keys[start:start + size]]
            domain = [d for d, _m, _l in chunk if d]
            part = [m for _d, ms, _l in chunk for m in ms]
            first = chunk[0][2][0]
            # the symbolic constexprs are the same on both sides (the domain's values): take the chunk's first
            right_first = {**right, **{n: first[n] for n in spec.symbolic if n in first and n in right}}
            ck = hashlib.sha256(json.dumps([shash, g.name, "across", key, right_first, domain], sort_keys=True,
                                           default=str).encode()).hexdigest()[:32]
            out.append(Group(entry["kernel"].fn.__name__, entry["family"], f"{g.name} across", part, src, ck,
                             (ei, gi, key, domain, first, right_first), kernel_lines))
    return out


def verify_configs(wanted: Wanted, *, cache_dir: Path | None = None,
                   on_group: Callable[[int, int, "Group", dict], None] | None = None,
                   workers: int | None = None) -> list[Result]:
    """The proofs one deployment needs (see catalog_plan's `wanted`) and the host-module launch rows, from
    the same per-group cache as verify_catalog (whose later run reuses them); the rows of one `wanted` set
    are stored too, so a second launch of the same deployment reads one file.  on_group(done, todo, group,
    summary) is called as each proof not in the cache finishes."""
    cache_dir = _ready(cache_dir)
    fp = _fingerprint(None)
    digest = hashlib.sha256(json.dumps(sorted((f, sorted(v)) for f, v in wanted.items()),
                                       default=str).encode()).hexdigest()[:16]
    return _stored_rows(cache_dir / f"launch-{fp}-{digest}.json" if fp else None,
                        lambda: _verify_catalog(None, cache_dir, None, workers, wanted=wanted, on_group=on_group))


def _verify_catalog(kernel: str | None, cache_dir: Path, progress, workers, *, wanted: Wanted | None = None,
                    on_group=None) -> list[Result]:
    groups, results = catalog_plan(kernel, wanted)
    if progress:
        for r in results:
            progress(r)
    summaries: dict[int, tuple[dict, bool]] = {}

    def uncached(indices) -> list[int]:
        todo = []
        for i in indices:
            path = cache_dir / f"{groups[i].cache_key}.json"
            if path.exists():
                summaries[i] = (json.loads(path.read_text()), True)
            else:
                todo.append(i)
        return todo

    todo = uncached(range(len(groups)))
    if todo:
        with _proving(cache_dir):
            todo = uncached(todo)   # what another process proved while this one waited is read, not proved again
            _prove(groups, todo, summaries, cache_dir, workers, on_group)
    results += _launch_results(kernel, progress)
    for i, grp in enumerate(groups):
        out, cached = summaries[i]
        for cfg, _fam in grp.members:
            r = Result(grp.kernel, cfg, grp.goal, out["status"], out["obligation"], out["line"], out["message"],
                       0.0 if cached else out["seconds"] / len(grp.members), cached, grp.source, out["proved"])
            results.append(r)
            if progress:
                progress(r)
    return results


PROVING_LOCK = ".proving.lock"   # the file in a cache directory whose lock the proving process holds


def proof_order(group: Group) -> tuple:
    """Longest first, so the last proofs to finish are short ones and both cores stay busy: the largest kernels'
    first, their goals across two launches before the others, then by member count."""
    return -group.kernel_lines * (2 if group.goal.endswith(" across") else 1), -len(group.members)


@contextlib.contextmanager
def _proving(cache_dir: Path):
    """One process at a time proves into a cache directory: engine processes that start together (a server's
    workers, a test run's engines) would otherwise each prove the same missing groups on the same cores."""
    with open(cache_dir / PROVING_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _prove(groups: list[Group], todo: list[int], summaries: dict, cache_dir: Path, workers: int | None,
           on_group) -> None:
    """Prove the groups `todo` in `proof_order`, each one's summary written to the cache as it finishes (kept if
    interrupted)."""
    if not todo:
        return
    todo = sorted(todo, key=lambda i: proof_order(groups[i]))
    n = workers if workers is not None else min(len(todo), max(1, (os.cpu_count() or 1)))
    if multiprocessing.current_process().daemon:
        n = 1   # a daemonic process (vLLM's workers) may not start a pool: prove in this process

    def finished(done: int, i: int, out: dict) -> None:
        _write_atomic(cache_dir / f"{groups[i].cache_key}.json", json.dumps(out))
        summaries[i] = (out, False)
        if on_group:
            on_group(done, len(todo), groups[i], out)

    if n > 1:
        with ProcessPoolExecutor(n) as pool:
            pending = {pool.submit(_run_group, groups[i].task): i for i in todo}
            for done, fut in enumerate(as_completed(pending), 1):
                finished(done, pending[fut], fut.result())
    else:
        for done, i in enumerate(todo, 1):
            finished(done, i, _run_group(groups[i].task))


def _launch_results(kernel: str | None, progress) -> list[Result]:
    """One row per host module: its launches take every constexpr, num_warps and `same` scalar from the model
    config, launch the contract's grid and no autotuned kernel, and each is preceded by the runtime launch
    guard's check of the same values (vosti_plugin/verifier/launch.py)."""
    from vosti_plugin.verifier.launch import check_module

    from vosti_plugin.verifier.fingerprint import module_file

    root = Path(__file__).resolve().parent.parent
    out = []
    for module in catalog_modules():
        path = module_file(module)
        if path is None or "@triton.jit" not in path.read_text():
            continue
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        name = f"launch:{path.stem}"
        if kernel is not None and kernel not in name:
            continue
        t0 = time.perf_counter()
        found = check_module(path, require_guard=True)
        f = found[0] if found else None
        r = Result(name, {}, "launches_match_proofs", "failed" if found else "proved",
                   f.obligation if f else "", f.line if f else 0,
                   (f"{f.function} launches {f.kernel}: {f.name}: {f.because}" if f else ""),
                   time.perf_counter() - t0, False, str(rel))
        out.append(r)
        if progress:
            progress(r)
    return out


def _write_atomic(path: Path, text: str) -> None:
    """Engine processes starting together may verify at once: a reader sees a whole file or none."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def cached_results(cache_dir: Path | None = None) -> list[Result] | None:
    """The whole-catalog results of the current sources if a previous verify_catalog() stored them."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    fp = _fingerprint(None)
    path = cache_dir / f"catalog-{fp}.json" if fp else None
    return _read_rows(path) if path is not None and path.exists() else None


def proved_configs(results: Iterable[Result] | None = None, *, run: bool = False,
                   cache_dir: Path | None = None, wanted: Wanted | None = None) -> list[tuple[str, tuple]]:
    """(family, sorted config items) of every catalog config all of whose kernels and goals are proved;
    families and configs are those of the plugin's launch catalogs (AttentionLaunchConfig, MatmulConfig...).
    With `wanted`, a launch config of a family it names counts as proved when the constexpr configs that
    deployment launches of it are (wants()); without, only when every one the catalog lists is.
    Without `results`, reads the cached catalog verification of the current sources (run=True verifies
    when there is none: a cold catalog run takes about 425 CPU-s: 4-8 minutes on 2 cores, 32 s on 16; `python -m vosti_plugin.verifier.bench`)."""
    if results is None:
        results = cached_results(cache_dir)
        if results is None:
            if not run:
                return []
            results = verify_catalog(cache_dir=cache_dir)
    results = list(results)
    entries = catalog_entries()
    status: dict[tuple, bool] = {}
    by_kernel: dict[tuple, bool] = {}
    for r in results:
        k = (r.kernel, json.dumps(r.config, sort_keys=True, default=str))
        by_kernel[k] = by_kernel.get(k, True) and r.status == "proved"
    for entry in entries:
        name = entry["kernel"].fn.__name__
        for cfg, fam in entry["configs"]:
            if not wants(wanted, entry["family"], cfg, fam):
                continue
            fk = (entry["family"], tuple(sorted(fam.items())))
            ok = by_kernel.get((name, json.dumps(cfg, sort_keys=True, default=str)), False)
            status[fk] = status.get(fk, True) and ok
    return [fk for fk, ok in status.items() if ok]


_ = (results_json, results_table)
