"""The chain that lets one deployment run prefill steps fused in taller tiles and decode steps split
(VOSTI_PREFILL_FUSED_FROM), proved with real Z3 on the shipped kernel's own goals, and mutants of the kernel on which a
link fails:

  * probe_free: a fused launch that also stores its partials (PROBE, verification only) gives the same rows;
  * probe_equals_split: those stored partials equal the split launch's partials of the same row (other tile height);
  * fused_equals_fold: the fused row equals the FOLD launch's row on the partials the fused launch stored;
  * fold_invariance: a FOLD row depends only on the row's partials, so it is the split path's row.
"""
import importlib.util
import sys

import pytest

from vosti_plugin.attention import paged_attention as shipped
from vosti_plugin.verifier.check import check_goal
from vosti_plugin.verifier.contracts import contract_of
from vosti_plugin.verifier.frontend import kernel_from_function

SPLIT = {"HEAD_DIM": 128, "HEAD_DIM_PAD": 128, "PAGE_SIZE": 64, "QUERIES_PER_KV": 4, "GROUP": 4,
         "HEAD_BLOCKS": 1, "BLOCK_Q": 16,
         "BLOCK_M": 64, "BLOCK_N": 64, "SEGMENT": 512, "SEQ_SCAN_CHUNK": 128, "DOT_PRECISION": "tf32",
         "ROW_SUMS_BY_DOT": False, "USE_SOFT_CAP": False, "USE_WINDOW": True, "FUSED": False, "FOLD": False,
         "PROBE": False, "SEGMENT_STRIDE": shipped.SPLIT_SEGMENT_STRIDE, "KV_TMA": False}
FUSED_128 = {**SPLIT, "FUSED": True, "SEGMENT_STRIDE": 1, "BLOCK_Q": 32, "BLOCK_M": 128}   # config.prefill_config of the Llama geometry
FOLD_1 = {**SPLIT, "FUSED": True, "SEGMENT_STRIDE": 1, "FOLD": True, "BLOCK_Q": 1, "BLOCK_M": 4}   # a KV head's heads
FOLD_HEADS = {**FOLD_1, "GROUP": 1, "BLOCK_M": 1, "HEAD_BLOCKS": 4}   # config.fold_config: a program a query head
FOLD_16 = {**FOLD_1, "BLOCK_Q": 4, "BLOCK_M": 16}   # several tokens a program: their segment ranges differ
PROBE_128 = {**FUSED_128, "PROBE": True}
# config.prefill_config where a KV tile is a page: the split tiles, K/V read by TMA descriptor loads
FUSED_TMA = {**SPLIT, "FUSED": True, "SEGMENT_STRIDE": 1, "KV_TMA": True}
PROBE_TMA = {**FUSED_TMA, "PROBE": True}
_TMA_WHOLE_TILE = ("                    page = tl.load(block_table_row + tile * BLOCK_N // PAGE_SIZE)\n"
                   "                    k = k_desc.load([page, kv_head, tile * BLOCK_N % PAGE_SIZE, 0])"
                   ".reshape(BLOCK_N, HEAD_DIM_PAD)\n                    v = v_desc.load(")
_TMA_MASKED_V = ("                    v = tl.where(key_valid[:, None], v_desc.load([page, kv_head, tile * BLOCK_N % "
                 "PAGE_SIZE, 0])\n                                 .reshape(BLOCK_N, HEAD_DIM_PAD), 0.0)")

# (name, old, new): a kernel edit that breaks one link of the chain
_MUTANTS = {
    # the FOLD launch reads each segment's partial one segment late
    "fold-reads-next-segment": ("            m_i = tl.load(part_m_ptr + part, mask=row_valid, other=float(\"-inf\"))",
                                "            m_i = tl.load(part_m_ptr + part + 1, mask=row_valid, other=float(\"-inf\"))"),
    # the FOLD launch folds every segment of the block, live for the row or not (with one token a program, the
    # block's segments are the row's: the mutant needs several tokens a program, FOLD_16, to be wrong)
    "fold-without-liveness": ("            run_m = tl.where(seg_live, fold_m, run_m)",
                              "            run_m = tl.where(seg_live | FOLD, fold_m, run_m)"),
    # a split program starts at the block's first segment instead of its own residue class: programs z and z + 1
    # compute the same segments and some segment's witness program (g mod SEGMENT_STRIDE) never visits it
    "split-stride-off-class": ("    seg_begin = tl.program_id(2) + (seg_lag + SEGMENT_STRIDE - 1) // SEGMENT_STRIDE * SEGMENT_STRIDE",
                               "    seg_begin = tl.program_id(2) + seg_lag"),
    # a FOLD program of one query head folds its KV head's first head whatever its head block: the others go unwritten
    "fold-heads-without-offset": ("        head_in_group += tl.program_id(1) % HEAD_BLOCKS * GROUP",
                                  "        head_in_group += 0"),
    # the head blocks' programs taken for KV heads: a program folds another KV head's rows
    "fold-heads-as-kv-heads": ("        kv_head = tl.program_id(1) // HEAD_BLOCKS",
                               "        kv_head = tl.program_id(1) % (HEAD_BLOCKS + 1)"),
    # a split program steps over every other segment of its class: those segments are never computed
    "split-stride-skips": ("    for seg in range(seg_begin, seg_end, SEGMENT_STRIDE):",
                           "    for seg in range(seg_begin, seg_end, 2 * SEGMENT_STRIDE):"),
    # the probe stores the running fold instead of the segment's own partial
    "probe-stores-running-max": ("            tl.store(part_m_ptr + part, m_i, mask=row_valid)",
                                 "            tl.store(part_m_ptr + part, tl.where(FUSED, run_m, m_i), mask=row_valid)"),
    # a TMA tile reads the next block-table entry's page
    "tma-next-page": (_TMA_WHOLE_TILE, _TMA_WHOLE_TILE.replace("tile * BLOCK_N // PAGE_SIZE)", "tile * BLOCK_N // PAGE_SIZE + 1)")),
    # a TMA tile's values past the block's last row are not zeroed (the cache may hold NaN there: 0 * NaN)
    "tma-values-unmasked": (_TMA_MASKED_V, "                    v = v_desc.load([page, kv_head, tile * BLOCK_N % "
                                           "PAGE_SIZE, 0]).reshape(BLOCK_N, HEAD_DIM_PAD)"),
}


def _goals(kernel):
    return {g.name: g for g in contract_of(kernel).verif}


@pytest.fixture(scope="module")
def production():
    kernel = shipped._paged_attention_segments_kernel
    return kernel_from_function(kernel), contract_of(kernel), _goals(kernel)


def _mutant(tmp_path_factory, name: str):
    old, new = _MUTANTS[name]
    source = shipped.__file__
    text = open(source).read()
    assert text.count(old) == 1, name
    path = tmp_path_factory.mktemp("mutant") / f"mutant_{name.replace('-', '_')}.py"
    path.write_text(text.replace(old, new))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    kernel = mod._paged_attention_segments_kernel
    return kernel_from_function(kernel), contract_of(kernel), _goals(kernel)


def _check(variant, goal: str, left: dict, right: dict | None = None):
    ir, spec, goals = variant
    return check_goal(ir, spec, goals[goal], left, right_config=right, timeout_ms=5000)


@pytest.mark.parametrize("window", [True, False])
@pytest.mark.parametrize("goal,left,right", [
    ("probe_free", PROBE_128, FUSED_128),
    ("probe_equals_split", PROBE_128, SPLIT),
    ("fused_equals_fold", PROBE_128, FOLD_1),
    ("fused_equals_fold", PROBE_128, FOLD_16),
    ("fused_equals_fold", PROBE_128, FOLD_HEADS),
    ("fold_invariance", FOLD_1, None),
    ("fold_invariance", FOLD_HEADS, None),
    ("causal_row_invariance", FUSED_128, None),
    ("causal_row_invariance", FUSED_TMA, None),
    ("probe_free", PROBE_TMA, FUSED_TMA),
    ("probe_equals_split", PROBE_TMA, SPLIT),
    ("fused_equals_fold", PROBE_TMA, FOLD_HEADS),
])
def test_each_link_of_the_chain_is_proved(production, goal, left, right, window):
    flag = {"USE_WINDOW": window}
    rep = _check(production, goal, {**left, **flag}, {**right, **flag} if right else None)
    assert rep.status == "proved", rep.failure


def test_the_goals_select_their_pairs(production):
    """Each chain goal is proved on the catalog pairs its `when`/`right_when` pick, not on the others."""
    _ir, _spec, goals = production
    picks = {name: {r for r, cfg in (("fused", FUSED_128), ("fold", FOLD_1), ("split", SPLIT))
                    if goals[name].applies(PROBE_128) and goals[name].applies_right(cfg)}
             for name in ("probe_free", "probe_equals_split", "fused_equals_fold")}
    assert picks == {"probe_free": {"fused"}, "probe_equals_split": {"split"}, "fused_equals_fold": {"fold"}}
    assert not goals["causal_row_invariance"].applies(FOLD_1) and goals["fold_invariance"].applies(FOLD_1)


def test_without_the_probe_the_fold_input_is_not_the_fused_launchs(production):
    rep = _check(production, "fused_equals_fold", FUSED_128, FOLD_1)
    assert rep.status == "failed" and rep.failure.name == "coverage", rep


@pytest.mark.parametrize("mutant,goal,left,right", [
    ("fold-reads-next-segment", "fused_equals_fold", PROBE_128, FOLD_1),
    ("fold-reads-next-segment", "fold_invariance", FOLD_1, None),
    ("fold-without-liveness", "fused_equals_fold", PROBE_128, FOLD_16),
    ("probe-stores-running-max", "probe_equals_split", PROBE_128, SPLIT),
    ("fold-heads-without-offset", "fused_equals_fold", PROBE_128, FOLD_HEADS),
    ("fold-heads-without-offset", "fold_invariance", FOLD_HEADS, None),
    ("fold-heads-as-kv-heads", "fused_equals_fold", PROBE_128, FOLD_HEADS),
    # without a window: a window's tiles all run the masked loop, the mutant's is the unmasked one
    ("tma-next-page", "causal_row_invariance", {**FUSED_TMA, "USE_WINDOW": False}, None),
    ("tma-next-page", "probe_equals_split", {**PROBE_TMA, "USE_WINDOW": False}, {**SPLIT, "USE_WINDOW": False}),
    ("tma-values-unmasked", "probe_equals_split", PROBE_TMA, SPLIT),
])
def test_a_broken_link_fails(tmp_path_factory, mutant, goal, left, right):
    rep = _check(_mutant(tmp_path_factory, mutant), goal, left, right)
    assert rep.status == "failed", rep


@pytest.mark.slow
@pytest.mark.parametrize("mutant", ["split-stride-off-class", "split-stride-skips"])
def test_split_programs_off_their_segments_fail(tmp_path_factory, mutant):
    """Split programs a SEGMENT_STRIDE apart: a program that leaves its residue class of segments, or skips some of
    its class, fails the split goal (the shipped kernel's is proved in test_verifier_decode_tile_rows)."""
    rep = _check(_mutant(tmp_path_factory, mutant), "causal_segment_partials", SPLIT)
    assert rep.status == "failed", rep


def test_the_catalog_chains_every_fused_prefill_launch(monkeypatch):
    """With the switch on, every fused prefill launch config of the catalog has the three chain pairs, each with its
    rows recorded for the launched config; off, the catalog has none."""
    import json

    monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "512")
    entry = shipped.verifier_catalog()[0]
    launched = {json.dumps(c, sort_keys=True) for c, _fam in entry["configs"]}
    chained: dict[str, set] = {}
    for pair in entry["cross"]:
        if len(pair) == 4:
            left, right, _fam, row = pair
            assert left == {**row, "PROBE": True} and json.dumps(row, sort_keys=True) in launched
            kind = "fold" if right["FOLD"] else "fused" if right["FUSED"] else "split"
            chained.setdefault(json.dumps(row, sort_keys=True), set()).add(kind)
    fused_prefill = {json.dumps(c, sort_keys=True) for c, fam in entry["configs"]
                     if c["FUSED"] and not c["FOLD"] and c["BLOCK_M"] == fam["block_m"] and fam["block_m"] > 32
                     and fam["num_warps"] == 8 and c["HEAD_DIM"] <= 128}
    assert fused_prefill and fused_prefill <= set(chained)
    assert all(kinds == {"fold", "fused", "split"} for kinds in chained.values())
    monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "0")
    assert not any(len(p) == 4 for p in shipped.verifier_catalog()[0]["cross"])


def test_the_default_catalog_chains_the_16_bit_groups_of_up_to_8(monkeypatch):
    """Unset, the catalog lists the chain for exactly the geometries that run both paths by default."""
    monkeypatch.delenv("VOSTI_PREFILL_FUSED_FROM", raising=False)
    rows = [pair[3] for pair in shipped.verifier_catalog()[0]["cross"] if len(pair) == 4]
    assert rows
    assert {r["DOT_PRECISION"] for r in rows} == {"tf32"} and max(r["GROUP"] for r in rows) == 8
    assert {r["QUERIES_PER_KV"] for r in rows} == set(range(1, 9))


def test_the_stored_catalog_is_kept_apart_for_unset_off_and_on(monkeypatch):
    """Three catalogs (the default's, none, every geometry's chain): three stored verifications; every positive
    threshold lists the same catalog."""
    from vosti_plugin.verifier.api import _fingerprint

    fps = {}
    for value in (None, "0", "512", "64"):
        if value is None:
            monkeypatch.delenv("VOSTI_PREFILL_FUSED_FROM", raising=False)
        else:
            monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", value)
        fps[value] = _fingerprint(None)
    assert len({fps[None], fps["0"], fps["512"]}) == 3 and fps["512"] == fps["64"]


def test_cross_proofs_of_large_query_groups_cover_one_geometry_each(monkeypatch):
    """A chain proof over many geometries can run out of Z3's time (a group of 16 query heads over 480 geometries
    did): groups of 16+ take one (head dim, queries per KV head, page size) a proof; smaller groups one proof."""
    from vosti_plugin.verifier.api import catalog_plan

    monkeypatch.setenv("VOSTI_PREFILL_FUSED_FROM", "512")
    groups, _ = catalog_plan("_paged_attention_segments_kernel")
    chain = [g for g in groups if g.goal.split()[0] in ("probe_free", "probe_equals_split", "fused_equals_fold")]
    assert chain
    for g in chain:
        domain = g.task[3]
        if g.task[2]["GROUP"] >= 16:
            assert len(domain) <= 4 and len({(d["HEAD_DIM"], d["QUERIES_PER_KV"], d["PAGE_SIZE"]) for d in domain}) == 1
        # the right launch shares the chunk's symbolic values (only `across` names may differ)
        assert all(g.task[5][n] == g.task[4][n] for n in domain[0] if n in g.task[5])
