"""The proofs every deployment needs, made while the offline launch check is still importing vLLM.

`vosti verify --model` spends its first ~10 s importing vLLM and building its config on one core, and only then
knows the geometry. Every family but the exact ones (verified.EXACT_FAMILIES: attention, proved at the
deployment's own geometry) is proved whole for any deployment, in the same groups as the catalog's, so a child
process proves those meanwhile, longest first, into the same proof cache. It stops at the first group boundary
after another process holds the cache's proof lock (the check's own proving, which then proves what is left),
and it is terminated when the check returns: by then every proof the check needed is in the cache.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import multiprocessing
import os
from pathlib import Path

_started: set[str] = set()   # cache dirs this process has proved ahead into (later checks find them proved)
_proved = None   # the child's count of groups proved, shared with this process


def proved_ahead() -> int:
    """Groups the child has proved so far in this process's check (0 without one)."""
    return _proved.value if _proved is not None else 0


def _lock_taken(cache_dir: Path) -> bool:
    """Does another process hold the proof lock of this cache dir (verifier.api._proving's)?"""
    from vosti_plugin.verifier.api import PROVING_LOCK

    with open(cache_dir / PROVING_LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False


def _prove_whole_families(exact: tuple[str, ...], stop, proved) -> None:
    from vosti_plugin.verifier import api

    cache_dir = api._ready(None)
    fp = api._fingerprint(None)
    if fp is None or (cache_dir / f"catalog-{fp}.json").exists():
        return   # the whole catalog's verification is stored: the check reads it and proves nothing
    groups, _rejected = api.catalog_plan(wanted={family: set() for family in exact})
    todo = [g for g in groups if not (cache_dir / f"{g.cache_key}.json").exists()]
    todo.sort(key=api.proof_order)
    for g in todo:
        if stop.is_set() or _lock_taken(cache_dir):
            return
        path = cache_dir / f"{g.cache_key}.json"
        if path.exists():
            continue
        api._write_atomic(path, json.dumps(api._run_group(g.task)))
        with proved.get_lock():
            proved.value += 1


@contextlib.contextmanager
def proving_ahead():
    """Prove the whole families in a child process for the duration of the block (see the module doc); nothing
    in a daemonic process (no children allowed), with VOSTI_PROVE_AHEAD=0, or where this process already did."""
    global _proved
    from vosti_plugin.launch.verified import EXACT_FAMILIES
    from vosti_plugin.verifier.api import default_cache_dir

    key = str(default_cache_dir())
    if (multiprocessing.current_process().daemon or os.environ.get("VOSTI_PROVE_AHEAD", "1") == "0"
            or key in _started or "fork" not in multiprocessing.get_all_start_methods()):
        yield
        return
    _started.add(key)
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    _proved = ctx.Value("i", 0)
    child = ctx.Process(target=_prove_whole_families, args=(EXACT_FAMILIES, stop, _proved), daemon=True,
                        name="vosti-prove-ahead")
    child.start()
    try:
        yield
    finally:
        stop.set()
        if child.is_alive():
            child.terminate()   # what it is still proving, the check has proved itself
        child.join()
        _proved = None
