"""Cross-config goals: a relational goal proved between two launches whose tile constexprs differ (a decode
launch's tiles against a prefill launch's), with real kernels and real Z3. A pair that changes a row's
reduction order must fail, and a pair differing outside the goal's `across` must be refused."""
import dataclasses

import pytest
import torch

from vosti_plugin.attention import paged_attention as pa
from vosti_plugin.ops import matmul as mm
from vosti_plugin.verifier.api import Result, _run_group, catalog_plan, proved_configs
from vosti_plugin.verifier.check import check_goal
from vosti_plugin.verifier.contracts import contract_of
from vosti_plugin.verifier.frontend import kernel_from_function

ATTENTION = {"HEAD_DIM": 128, "HEAD_DIM_PAD": 128, "PAGE_SIZE": 64, "QUERIES_PER_KV": 4, "GROUP": 4, "HEAD_BLOCKS": 1,
             "BLOCK_Q": 16, "BLOCK_M": 64, "BLOCK_N": 64, "SEGMENT": 512, "SEQ_SCAN_CHUNK": 128,
             "DOT_PRECISION": "tf32", "ROW_SUMS_BY_DOT": False, "KV_TMA": False, "USE_SOFT_CAP": False, "USE_WINDOW": True,
             "FOLD": False, "PROBE": False}


def _attention_goal(fused: bool, across: tuple[str, ...]):
    spec = contract_of(pa._paged_attention_segments_kernel)
    name = "causal_row_invariance" if fused else "causal_segment_partials"
    g = next(g for g in spec.verif if g.name == name)
    return kernel_from_function(pa._paged_attention_segments_kernel), spec, dataclasses.replace(g, across=across)


@pytest.mark.parametrize("fused", [False, True])
def test_attention_rows_are_equal_between_64_and_128_row_tiles(fused):
    k, spec, g = _attention_goal(fused, ("BLOCK_Q", "BLOCK_M"))
    left = pa._launch_mode(ATTENTION, fused)
    rep = check_goal(k, spec, g, left, right_config={**left, "BLOCK_Q": 32, "BLOCK_M": 128})
    assert rep.status == "proved", rep.failure
    assert rep.config["right"] == {"BLOCK_Q": 32, "BLOCK_M": 128}


def test_attention_segments_of_another_length_fold_other_bits_and_fail():
    k, spec, g = _attention_goal(True, ("BLOCK_Q", "BLOCK_M", "SEGMENT"))
    left = pa._launch_mode(ATTENTION, True)
    rep = check_goal(k, spec, g, left, right_config={**left, "SEGMENT": 256})
    assert rep.status == "failed" and rep.failure.name in ("loop-range", "masked-noop", "same-operation")


def test_a_pair_differing_outside_across_or_in_a_symbolic_constexpr_is_refused():
    k, spec, g = _attention_goal(False, ("BLOCK_Q", "BLOCK_M", "BLOCK_N"))
    left = pa._launch_mode(ATTENTION, False)
    for right in ({**left, "SEGMENT": 1024}, {**left, "BLOCK_N": 32}):  # BLOCK_N is symbolic in this contract
        rep = check_goal(k, spec, g, left, right_config=right)
        assert rep.status == "failed" and rep.failure.name == "contract"
        assert "across" in rep.failure.message


def test_matmul_rows_equal_across_tiles_but_not_across_block_k():
    k, spec = kernel_from_function(mm.mm_kernel), contract_of(mm.mm_kernel)
    g = spec.verif[0]
    assert g.across == ("BLOCK_M", "BLOCK_N")
    decode = {"HAS_BIAS": True, "DOT_PRECISION": "tf32", "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128}
    tall = {**decode, "BLOCK_M": 128, "BLOCK_N": 256}
    assert check_goal(k, spec, g, tall, right_config=decode).status == "proved"
    wider_k = dataclasses.replace(g, across=("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    rep = check_goal(k, spec, wider_k, {**tall, "BLOCK_K": 64}, right_config=decode)
    assert rep.status == "failed" and rep.failure.name == "loop-range"


def test_catalog_proves_every_split1_tall_launch_against_its_decode_tiles():
    groups, _ = catalog_plan("mm_kernel")
    cross = {(tuple(sorted(g.task[4].items())), tuple(sorted(g.task[5].items()))): g
             for g in groups if g.goal == "row_invariance across"}
    configs = [(cfg, getattr(torch, dt)) for (_n, _k, dt), cfg in mm.CATALOG.items()] + mm.rule_configs()
    wanted = 0
    for cfg, dtype in configs:
        tall = mm.tall_config(cfg, dtype)
        if cfg.split_k != 1 or (tall.block_m, tall.block_n) == (cfg.block_m, cfg.block_n):
            continue
        for bias in (False, True):
            decode = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k,
                      "DOT_PRECISION": mm._dot_precision(dtype), "HAS_BIAS": bias}
            key = (tuple(sorted({**decode, "BLOCK_M": tall.block_m, "BLOCK_N": tall.block_n}.items())),
                   tuple(sorted(decode.items())))
            assert key in cross, (cfg, dtype)
            wanted += 1
    assert wanted and cross  # many shapes share their tiles: each distinct pair is proved once
    for g in cross.values():
        assert _run_group(g.task)["status"] == "proved"


def test_a_failed_cross_row_leaves_its_tall_config_unproved():
    groups, _ = catalog_plan("mm_kernel")
    rows = [Result(g.kernel, cfg, g.goal, "proved", "", 0, "", 0.0, True, g.source)
            for g in groups for cfg, _fam in g.members]
    fams = {f for f in proved_configs(rows) if f[0] == "matmul"}
    cross = next(g for g in groups if g.goal == "row_invariance across")
    tall_fam = ("matmul", tuple(sorted(cross.members[0][1].items())))
    assert tall_fam in fams
    broken = [dataclasses.replace(r, status="failed") if r.contract == cross.goal and r.config == cross.members[0][0]
              else r for r in rows]
    assert tall_fam not in set(proved_configs(broken))
