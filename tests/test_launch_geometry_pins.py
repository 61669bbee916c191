"""A deployment's on-demand proofs range over its own geometry (head dim, page size, dtype, soft cap, window
masks), a launch config counts as proved when that geometry's constexpr configs are, and an attention layer
built outside those pins is refused rather than launched unproved."""
import dataclasses
import json

import pytest

from vosti_plugin.launch import verified
from vosti_plugin.launch.facts import LaunchFacts
from vosti_plugin.verifier.api import Result, catalog_entries, catalog_plan, proved_configs, wants

LLAMA_CUDA = LaunchFacts(
    model="llama", architecture="LlamaForCausalLM", dtype="bfloat16", head_size=128, num_q_heads=32,
    num_kv_heads=8, num_layers=32, hidden_size=4096, intermediate_size=14336, vocab_size=128256,
    sliding_window=None, page_size=16, max_model_len=8192, max_num_batched_tokens=2048, max_num_seqs=16,
    num_gpu_blocks=1000, platform="cuda", scheduler_cls="vosti_plugin.scheduler.VostiScheduler",
)
GEMMA2_CUDA = dataclasses.replace(LLAMA_CUDA, architecture="Gemma2ForCausalLM", head_size=256, num_q_heads=8,
                                  num_kv_heads=4, sliding_window=4096, attention_soft_cap=True)


def test_wants_keeps_the_pinned_values_and_ignores_pins_a_config_does_not_take():
    launch = (("block_m", 64),)
    wanted = {"paged_attention": {(launch, (("HEAD_DIM", (128,)), ("USE_WINDOW", (False, True))))}}
    assert wants(wanted, "paged_attention", {"HEAD_DIM": 128, "USE_WINDOW": True}, {"block_m": 64})
    assert not wants(wanted, "paged_attention", {"HEAD_DIM": 256, "USE_WINDOW": True}, {"block_m": 64})
    assert not wants(wanted, "paged_attention", {"HEAD_DIM": 128}, {"block_m": 32})
    assert wants(wanted, "paged_attention", {"SEGMENT": 512}, {"block_m": 64})   # takes neither pin
    assert wants(wanted, "matmul", {"HEAD_DIM": 256}, {"anything": 1})          # a family not named
    assert wants(None, "paged_attention", {"HEAD_DIM": 256}, {"block_m": 32})


@pytest.mark.parametrize("facts, soft_caps, windows", [
    (LLAMA_CUDA, {False}, {False}),
    (GEMMA2_CUDA, {True}, {False, True}),
])
def test_on_demand_attention_proofs_range_over_the_deployments_geometry_only(facts, soft_caps, windows):
    groups, _ = catalog_plan(wanted=verified.wanted_configs(facts))
    attention = [g for g in groups if g.family == "paged_attention"]
    assert attention
    members = [cfg for g in attention for cfg, _fam in g.members]
    assert {c["HEAD_DIM"] for c in members} == {facts.head_size}
    assert {c["PAGE_SIZE"] for c in members if "PAGE_SIZE" in c} == {facts.page_size}
    assert {c["DOT_PRECISION"] for c in members if "DOT_PRECISION" in c} == {"tf32"}
    assert {c["USE_SOFT_CAP"] for c in members if "USE_SOFT_CAP" in c} == soft_caps
    assert {c["USE_WINDOW"] for c in members} == windows
    # each proof's symbolic domain is the members' values, not the catalog group's (60 geometries for Llama's)
    for g in attention:
        assert len(g.task[3]) <= len(soft_caps) * len(windows), (g.goal, g.task[3])
    every, _ = catalog_plan()
    assert max(len(g.task[3]) for g in every if g.family == "paged_attention") > 8


def _rows_for(family: str, fam_items: tuple, fail=lambda cfg: False) -> list[Result]:
    rows = []
    for entry in catalog_entries():
        if entry["family"] != family:
            continue
        for cfg, fam in entry["configs"]:
            if tuple(sorted(fam.items())) == fam_items:
                rows.append(Result(entry["kernel"].fn.__name__, cfg, "goal", "failed" if fail(cfg) else "proved",
                                   "", 0, "", 0.0))
    return rows


def test_a_launch_config_is_proved_by_its_geometrys_rows_and_refused_when_one_of_them_fails():
    wanted = verified.wanted_configs(LLAMA_CUDA)
    fam_items = next(iter(wanted["paged_attention"]))[0]
    key = ("paged_attention", fam_items)
    other_geometry = lambda cfg: cfg["HEAD_DIM"] != LLAMA_CUDA.head_size   # noqa: E731
    own_geometry = lambda cfg: cfg["HEAD_DIM"] == LLAMA_CUDA.head_size     # noqa: E731
    rows = _rows_for("paged_attention", fam_items, fail=other_geometry)
    assert any(r.status == "failed" for r in rows), "the launch config is shared with no other head dim"
    assert key in proved_configs(rows, wanted=wanted)
    assert key not in proved_configs(rows)            # the whole catalog's rule: every geometry of it
    failing_own = _rows_for("paged_attention", fam_items, fail=own_geometry)
    assert key not in proved_configs(failing_own, wanted=wanted)
    only_other = [r for r in rows if other_geometry(r.config)]   # the deployment's own rows missing
    assert key not in proved_configs(only_other, wanted=wanted)


def test_the_launch_rows_of_two_geometries_are_stored_apart(tmp_path, monkeypatch):
    """Two deployments that share a launch config but not a head dim do not read each other's launch rows."""
    a = verified.wanted_configs(LLAMA_CUDA)
    b = verified.wanted_configs(dataclasses.replace(LLAMA_CUDA, head_size=64))
    assert {x for x, _ in next(iter(a.values()))} & {x for x, _ in next(iter(b.values()))}
    digest = lambda w: json.dumps(sorted((f, sorted(v)) for f, v in w.items()), default=str)  # noqa: E731
    assert digest(a) != digest(b)


@pytest.mark.parametrize("facts, soft_cap, window, fires", [
    (LLAMA_CUDA, False, False, False),
    (LLAMA_CUDA, True, False, True),
    (LLAMA_CUDA, False, True, True),
    (GEMMA2_CUDA, True, True, False),
    (GEMMA2_CUDA, True, False, False),
    (GEMMA2_CUDA, False, False, True),
])
def test_an_attention_layer_outside_the_proved_pins_is_named(facts, soft_cap, window, fires):
    why = verified.layer_outside_pins(facts, soft_cap=soft_cap, window=window)
    assert bool(why) == fires, why
    if fires:
        assert "USE_SOFT_CAP" in why or "USE_WINDOW" in why


def test_launch_facts_read_the_attention_soft_cap_from_the_model_config(tmp_path):
    from vosti_plugin.integration.geometries import GEOMETRIES
    from vosti_plugin.integration.geometries.table import BASE_ARGS
    from vosti_plugin.launch.offline import offline_facts
    from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

    ensure_interpreter_without_gpu()
    seen = {}
    for name in ("gemma2-2b", "llama31-8b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(GEOMETRIES[name]))
        seen[name] = offline_facts(str(tmp_path / name), list(BASE_ARGS)).attention_soft_cap
    assert seen == {"gemma2-2b": True, "llama31-8b": False}
