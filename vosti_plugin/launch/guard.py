"""Runtime launch guard: a vosti kernel launch runs only with a constexpr config the verifier proved.

Every launch wrapper of a catalog kernel module calls `check(kernel, grid, **constexprs)` right before its
`kernel[grid](...)`, with the launch's own constexpr keywords; the verifier's launch-site pass checks that
the call is there with the same expressions (obligation `launch-guard`), and the same pass proves the
grid is the contract's grid and the `same` scalars are not taken from the batch. At run time the guard
looks the (kernel, config) key up in a frozenset of the configs whose every goal is proved (and whose host
module's launch check passed), built once from the cached catalog verification; an unproved launch raises
UnprovedLaunch naming the kernel and config, before anything runs. No Z3 at run time.

Armed by the launch check when it accepts a vosti launch (every process that runs vosti's kernels passes
one) if ON_BY_DEFAULT, VOSTI_LAUNCH_GUARD=1, or audit mode (VOSTI_AUDIT=1 or `--additional-config
'{"vosti": {"audit": true}}'`: the guard costs 1.7-3.2 % of an H200 decode step, over the 1 % that would
keep it on by default); VOSTI_LAUNCH_GUARD=1 also arms a process at import; VOSTI_LAUNCH_GUARD=0 turns it
off, audit mode included. Unarmed (a kernel called directly, outside a served engine), `check` returns at
once. `checked()` lists the (kernel, config) keys this process's launches passed (recorded once per call
site and config, on the first launch: nothing is added to a launch that already passed).
"""
from __future__ import annotations

import contextlib
import os

ENV = "VOSTI_LAUNCH_GUARD"


class UnprovedLaunch(RuntimeError):
    """A kernel launch outside the verifier's proved set (raised before the launch runs)."""

    def __init__(self, kernel: str, config: dict, why: str):
        self.kernel, self.config = kernel, config
        super().__init__(f"vosti launch guard: {kernel} with {config} is not proved: {why}; nothing was launched "
                         f"(`vosti verify --kernel {kernel}` shows its proof)")


_armed: bool = os.environ.get(ENV, "") == "1"
_proved: frozenset | None = None
_ranks: dict[str, int] = {}
_from_cache: dict = {}  # catalog fingerprint (sources and catalog switches) -> proved_keys() of its verification
_passed: dict = {}  # call-site key -> (kernel, config) already found in _proved (cleared when the proved set changes)


def key(kernel: str, config: dict) -> tuple:
    return (kernel, tuple(sorted(config.items())))


def proved_keys(results) -> tuple[frozenset, dict[str, int]]:
    """(kernel, config) keys whose every result row is proved, from verify_catalog() results; only kernels of
    host modules whose launch check passed. Also each kernel's grid rank."""
    from vosti_plugin.verifier.api import catalog_entries
    from vosti_plugin.verifier.contracts import contract_of

    ok: dict[tuple, bool] = {}
    launch_ok: dict[str, bool] = {}
    for r in results:
        if r.kernel.startswith("launch:"):
            launch_ok[r.kernel.split(":", 1)[1]] = r.status == "proved"
            continue
        k = key(r.kernel, r.config)
        ok[k] = ok.get(k, True) and r.status == "proved"
    ranks, keys = {}, set()
    for e in catalog_entries():
        fn = e["kernel"].fn
        ranks[fn.__name__] = len(contract_of(e["kernel"]).grid)
        if not launch_ok.get(fn.__module__.rsplit(".", 1)[-1], False):
            continue
        keys.update(k for cfg, _fam in e["configs"] if ok.get(k := key(fn.__name__, cfg), False))
    return frozenset(keys), ranks


def arm(results=None, wanted=None) -> None:
    """Check every later launch in this process against proved configs: those of `results` (verify_catalog() rows);
    else of the whole catalog's cached verification of the installed sources; else, given `wanted` (a deployment's
    launch configs, launch.verified.wanted_configs), the proofs that deployment needs (run now where not cached: its attention configs' groups, where
    a whole catalog with a switch on is minutes of proofs on 2 cores), added to the deployments armed before in
    this process; else the whole catalog's, run now."""
    global _armed, _proved, _ranks
    if os.environ.get(ENV, "") == "0":
        return
    if results is not None:
        _proved, _ranks = proved_keys(results)
    else:
        proved, ranks = _stored_proofs(wanted)
        if _armed and wanted is not None:
            proved = _proved | proved   # another deployment in this process: the set only grows
        _proved, _ranks = proved, {**_ranks, **ranks}
    _passed.clear()
    _armed = True


def _stored_proofs(wanted) -> tuple[frozenset, dict[str, int]]:
    from vosti_plugin.verifier.api import _fingerprint, cached_results, verify_catalog, verify_configs

    # the installed sources do not change within a process, the catalog switches may: read once per value
    fp = _fingerprint(None)
    if fp not in _from_cache:
        results = cached_results()
        if results is None and wanted is not None:
            key = (fp, repr(sorted((family, sorted(configs)) for family, configs in wanted.items())))
            if key not in _from_cache:
                _from_cache[key] = proved_keys(verify_configs(wanted))
            return _from_cache[key]
        _from_cache[fp] = proved_keys(results if results is not None else verify_catalog())
    return _from_cache[fp]


# integration/gpu/launch_guard_cost.py measured 451 checks per eager Llama-3.1-8B decode step on the H200,
# 1.7-3.2 % of the step (cff3b1c): over the 1 % budget, so the guard is on in audit mode, not by default.
ON_BY_DEFAULT = False


def requested(additional_config: dict | None = None) -> bool:
    """Should a served engine arm the guard: ON_BY_DEFAULT, VOSTI_LAUNCH_GUARD=1 or audit mode, unless
    VOSTI_LAUNCH_GUARD=0."""
    flag = os.environ.get(ENV, "")
    if flag == "0":
        return False
    if ON_BY_DEFAULT or flag == "1":
        return True
    from vosti_plugin.kvcache.audit import audit_requested

    return audit_requested(additional_config)


def arm_for_serving(additional_config: dict | None = None, wanted=None) -> None:
    """Called by the launch check once it accepted a vosti launch in this process (additional_config: the
    engine's `--additional-config`, where audit mode can be asked for; wanted: the accepted deployment's launch
    configs, launch.verified.wanted_configs, whose proofs join the armed set)."""
    if (_armed and wanted is None) or not requested(additional_config):
        return
    arm(wanted=wanted)


def disarm() -> None:
    global _armed
    _armed = False


@contextlib.contextmanager
def suspended():
    """Launches inside run unchecked; the guard's state (armed or not, the proved set) is restored after."""
    global _armed
    was, _armed = _armed, False
    try:
        yield
    finally:
        _armed = was


def armed() -> bool:
    return _armed


def checked() -> list[tuple[str, dict]]:
    """(kernel, constexpr config) of every distinct launch that passed the guard since it was last armed."""
    keys = dict.fromkeys((name, tuple(sorted(config.items()))) for name, config in _passed.values())
    return [(name, dict(items)) for name, items in keys]


def check(kernel, grid: tuple, **constexprs) -> None:
    """Raise UnprovedLaunch unless `kernel` (a @triton.jit function) with these constexprs is proved."""
    if not _armed:
        return
    if _proved is None:
        arm()
    site = (id(kernel), len(grid), *constexprs.items())  # keyword order is fixed per call site: no sort
    if site in _passed:
        return
    name = kernel.fn.__name__
    if (name, tuple(sorted(constexprs.items()))) not in _proved:
        raise UnprovedLaunch(name, constexprs, "no proof covers this constexpr config (outside the catalog, or "
                                               "a goal failed, or its host module's launch check failed)")
    if len(grid) != _ranks.get(name, len(grid)):
        raise UnprovedLaunch(name, constexprs, f"grid {grid} has {len(grid)} axes, the contract's grid "
                                               f"{_ranks[name]}")
    _passed[site] = (name, constexprs)
