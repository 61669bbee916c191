"""Real vLLM (CPU, tiny model): a vosti engine replaces exactly the inventory's attributes; undoing puts
back the very objects that were there before, and a stock engine then runs stock code only."""
from __future__ import annotations

import gc

import pytest

pytestmark = pytest.mark.vllm

PROMPT = [5, 77, 301, 42, 9, 123, 260, 11, 400, 17]
_MISSING = "<missing>"


def _snapshot() -> dict:
    """(owner, attribute) -> the object in the owner's __dict__ (or _MISSING), plus the CUSTOM override."""
    from vosti_plugin.vllm import compat, patches

    snap = {}
    for p in patches.inventory():
        try:
            owner = patches.resolve_owner(p.owner)
        except (ImportError, AttributeError):
            assert p.optional, f"{p.owner} is not optional but this vLLM lacks it"
            continue
        snap[(p.owner, p.attribute)] = vars(owner).get(p.attribute, _MISSING)
    for r in patches.REBINDINGS:   # rebound only while a constructor runs: stock at every snapshot
        snap[(r.owner, r.attribute)] = vars(patches.resolve_owner(r.owner))[r.attribute]
    snap[("registry", "CUSTOM")] = compat.custom_backend_path()
    return snap


def _vosti_made(obj) -> bool:
    """Code defined in vosti_plugin (functools.wraps copies the stock __module__, so ask the code object)."""
    if type(obj).__module__.startswith("vosti_plugin"):
        return True
    code = getattr(getattr(obj, "__func__", obj), "__code__", None)
    return code is not None and "/vosti_plugin/" in code.co_filename


def _greedy(llm, params_cls):
    out = llm.generate([{"prompt_token_ids": PROMPT}], params_cls(max_tokens=3, temperature=0, logprobs=5),
                       use_tqdm=False)
    return out[0].outputs[0]


@pytest.fixture
def stock_vllm():
    """vLLM as shipped: anything an earlier module applied is undone first, and re-registered after."""
    import vosti_plugin
    from vosti_plugin import selection
    from vosti_plugin.vllm import patches

    selection.deactivate()
    patches.undo()
    yield
    selection.deactivate()
    patches.undo()
    vosti_plugin.register()   # later modules expect the plugin loaded, as vLLM leaves it


def test_vosti_engine_then_undo_restores_every_patched_attribute(stock_vllm, tiny_model_path):
    from vllm import SamplingParams
    from vllm.v1.core.sched.scheduler import Scheduler

    import vosti_plugin
    from vosti_plugin import selection
    from vosti_plugin import forward_counters
    from vosti_plugin.integration.engine_presets import build_llm
    from vosti_plugin.vllm import compat, patches

    before = _snapshot()
    assert not [k for k, v in before.items() if _vosti_made(v)], "the stock snapshot holds vosti objects"
    assert before[("registry", "CUSTOM")] is None

    vosti_plugin.register()
    llm = build_llm(tiny_model_path, max_num_batched_tokens=64)
    try:
        with forward_counters.counting() as calls:
            _greedy(llm, SamplingParams)
        assert calls["attention"] > 0
        during = _snapshot()
        applied = {(e.patch.owner, e.patch.attribute) for done in patches._applied.values() for e in done}
        changed = {key for key in before if during[key] is not before[key]}
        assert changed == applied | {("registry", "CUSTOM")}
        assert {g for g in patches.GROUPS if patches.is_applied(g)} == set(patches.GROUPS)
        assert all(_vosti_made(during[key]) for key in applied)
    finally:
        del llm
        gc.collect()

    selection.deactivate()   # what a stock engine config does in this process: sampling and ops out
    patches.undo()
    after = _snapshot()
    assert not any(patches.is_applied(g) for g in patches.GROUPS)
    moved = [key for key in before
             if (after[key] != before[key] if key[0] == "registry" else after[key] is not before[key])]
    assert moved == [], f"not restored to the identical stock object: {moved}"
    with pytest.raises((KeyError, ValueError)):
        compat.attention_backend_enum()["VOSTI"]

    stock = build_llm(tiny_model_path, vosti=False)
    try:
        with forward_counters.counting() as calls:
            completion = _greedy(stock, SamplingParams)
        assert not calls, f"stock engine reached vosti code: {dict(calls)}"
        assert len(completion.token_ids) == 3
        assert type(stock.llm_engine.engine_core.engine_core.scheduler) is Scheduler
        assert _snapshot() == after
    finally:
        del stock
        gc.collect()
