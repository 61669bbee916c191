"""Decode in smaller row tiles, the verifier's half: a split launch in 16-row tiles gives every row the segment
partials of the 64-row launch that prefill runs (the shipped kernel's `causal_segment_partials` goal, proved
across BLOCK_M and BLOCK_Q), with real Z3. On the H200 16-row decode tiles take 0.72-0.83x the time of 64-row
ones on Gemma-3-4B's layers (integration/results/h200-s21/README.md). What the proof cannot cover is the
platform: whether the GPU's row sum reduces in the same order in both tile shapes (a launch-time probe's job,
as for the tall GEMM path). A kernel whose rows depend on the tile height fails, so the goal can fire."""
import inspect

import pytest

from vosti_plugin.attention import paged_attention
from vosti_plugin.verifier.check import check_goal
from vosti_plugin.verifier.contracts import contract_of
from vosti_plugin.verifier.frontend import kernel_from_function, kernel_from_source

LLAMA = {"HEAD_DIM": 128, "HEAD_DIM_PAD": 128, "PAGE_SIZE": 64, "QUERIES_PER_KV": 4, "GROUP": 4,
         "HEAD_BLOCKS": 1, "BLOCK_Q": 16,
         "BLOCK_M": 64, "BLOCK_N": 64, "SEGMENT": 512, "SEQ_SCAN_CHUNK": 128, "DOT_PRECISION": "tf32", "ROW_SUMS_BY_DOT": False, "KV_TMA": False,
         "USE_SOFT_CAP": False, "USE_WINDOW": False, "FUSED": False, "FOLD": False, "PROBE": False,
         "SEGMENT_STRIDE": paged_attention.SPLIT_SEGMENT_STRIDE}
GEMMA = {**LLAMA, "HEAD_DIM": 256, "HEAD_DIM_PAD": 256, "QUERIES_PER_KV": 2, "GROUP": 2, "BLOCK_Q": 32,
         "BLOCK_N": 32, "USE_SOFT_CAP": True}


def _goal_across_tile_height(kernel):
    spec = contract_of(kernel)
    split = next(g for g in spec.verif if g.name == "causal_segment_partials")
    assert split.across == ("BLOCK_Q", "BLOCK_M")   # the shipped goal is proved across tile heights
    return spec, split


def _decode_rows(cfg: dict, rows: int) -> dict:
    return {**cfg, "BLOCK_M": rows, "BLOCK_Q": rows // cfg["GROUP"]}


@pytest.mark.parametrize("window", [False, True])
@pytest.mark.parametrize("prefill", [LLAMA, GEMMA], ids=["llama", "gemma"])
def test_16_row_decode_tiles_give_the_64_row_partials(prefill, window):
    kernel = paged_attention._paged_attention_segments_kernel
    spec, goal = _goal_across_tile_height(kernel)
    cfg = {**prefill, "USE_WINDOW": window}
    rep = check_goal(kernel_from_function(kernel), spec, goal, _decode_rows(cfg, 16), right_config=cfg, timeout_ms=5000)
    assert rep.status == "proved", rep.failure


def test_a_kernel_whose_rows_follow_the_tile_height_fails():
    kernel = paged_attention._paged_attention_segments_kernel
    lines, start = inspect.getsourcelines(kernel.fn)
    source = "".join(lines)
    call = "scores = _tile_scores(q, k, scale, "
    assert source.count(call) == 2  # both tile loops
    mutated = source.replace(call, "scores = _tile_scores(q, k, scale * (BLOCK_M // 16), ")
    ir = kernel_from_source(mutated, name=kernel.fn.__name__, first_line=start, globals_=kernel.fn.__globals__)
    spec, goal = _goal_across_tile_height(kernel)
    same_height = check_goal(ir, spec, goal, LLAMA, right_config=LLAMA, timeout_ms=5000)
    assert same_height.status == "proved", same_height.failure  # within one tile height the mutant is consistent
    across = check_goal(ir, spec, goal, _decode_rows(LLAMA, 16), right_config=LLAMA, timeout_ms=5000)
    assert across.status == "failed"
