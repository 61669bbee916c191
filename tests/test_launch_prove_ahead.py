"""The offline check's child process proves the families every deployment needs while vLLM loads: exactly
the groups the launch's own proving would make of them (same cache keys, same verdicts), never the attention
family's, and nothing once another process holds the proof lock."""
import fcntl
import json
import multiprocessing
import shutil
import time

import pytest

from vosti_plugin.launch import prove_ahead
from vosti_plugin.launch.verified import EXACT_FAMILIES, wanted_configs
from vosti_plugin.verifier.api import catalog_plan, default_cache_dir

from tests.test_launch_obligations import GOOD

CHEAP = {"act_and_mul_kernel", "mean_kernel", "_write_kv_kernel"}   # whole-family kernels proved in ~0.1 s a group


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A proof cache holding the stored proofs of every group but the CHEAP kernels' (those are left to prove)."""
    stored = default_cache_dir()
    monkeypatch.setenv("VOSTI_CACHE_DIR", str(tmp_path))
    fresh = default_cache_dir()
    fresh.mkdir(parents=True)
    needed, _ = catalog_plan(wanted=wanted_configs(GOOD))
    left = [g for g in needed if g.kernel in CHEAP]
    assert left and all(g.family not in EXACT_FAMILIES for g in left)
    for g in needed:
        if g.kernel not in CHEAP and (stored / f"{g.cache_key}.json").exists():
            shutil.copy(stored / f"{g.cache_key}.json", fresh)
    return fresh, needed, left


def _run(stop=None):
    ctx = multiprocessing.get_context("fork")
    proved = ctx.Value("i", 0)
    prove_ahead._prove_whole_families(EXACT_FAMILIES, stop or ctx.Event(), proved)
    return proved.value


def test_proves_the_whole_families_groups_the_launch_needs_and_no_attention(cache):
    fresh, needed, left = cache
    before = {p.name for p in fresh.glob("*.json")}
    assert _run() == len(left)
    made = {p.name for p in fresh.glob("*.json")} - before
    assert made == {f"{g.cache_key}.json" for g in left}, "proved outside the launch's own groups"
    assert all(json.loads((fresh / name).read_text())["status"] == "proved" for name in made)
    assert _run() == 0, "proved again what the cache holds"


def test_proves_nothing_while_another_process_holds_the_proof_lock(cache):
    fresh, _needed, left = cache
    with open(fresh / ".proving.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert _run() == 0
    assert not any((fresh / f"{g.cache_key}.json").exists() for g in left)


def test_the_check_block_runs_a_child_and_ends_it(cache, monkeypatch):
    fresh, _needed, left = cache
    monkeypatch.setattr(prove_ahead, "_started", set())
    with prove_ahead.proving_ahead():
        deadline = time.monotonic() + 120
        while prove_ahead.proved_ahead() < len(left) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert prove_ahead.proved_ahead() == len(left)
    assert prove_ahead.proved_ahead() == 0 and not multiprocessing.active_children()
    assert all((fresh / f"{g.cache_key}.json").exists() for g in left)
    with prove_ahead.proving_ahead():   # this cache dir was proved ahead into once in this process: no child
        assert not multiprocessing.active_children()
