"""Split programs that each visit every segment_stride-th segment store the same partials, bit for bit, as one
program a segment, and the rows they give equal the fused path's and an fp64 reference's."""

import torch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vosti_plugin.attention import paged_attention as pa
from vosti_plugin.attention.config import AttentionLaunchConfig
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch
from vosti_plugin.integration.reference_attention import reference_attention

# two and a half minutes of interpreted kernels on 2 cores
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"), pytest.mark.slow]

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HEAD_DIM = 16
QUERIES_PER_KV = 2
# segments of 8 positions: a 40-token sequence spans 5 of them, so strides 2 and 3 give programs several each
CONFIG = AttentionLaunchConfig(block_q=2, block_m=2 * QUERIES_PER_KV, block_n=4, segment=8, num_warps=4, num_stages=1)
SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = st.lists(st.integers(1, 44).flatmap(lambda kv: st.tuples(st.just(kv), st.integers(1, kv))),
                  min_size=1, max_size=3)
windows = st.one_of(st.none(), st.integers(1, 20))


def _batch(shape_list, seed, spare_segments=0):
    """spare_segments: block-table columns past the longest sequence, as many segments' worth (vLLM's table is as
    wide as max_model_len, and a CUDA graph's grid follows it)."""
    requests = [random_request(kv, q, 2 * QUERIES_PER_KV, 2, HEAD_DIM, seed=seed + i, device=DEVICE)
                for i, (kv, q) in enumerate(shape_list)]
    return requests, build_paged_batch(requests, page_size=4, seed=seed, padding_rows=seed % 3,
                                       spare_table_columns=2 + spare_segments * CONFIG.segment // 4)


def _partials(batch, stride, window):
    """The split launch's workspace (m, l and acc of every row, head and segment; the grid from the block table's
    width) and its output rows."""
    num_tokens, num_q_heads, head_dim = batch.q.shape
    segments = pa.num_kv_segments(batch.block_table, 4, CONFIG.segment, None)
    workspace = torch.full((pa.split_workspace_numel(num_tokens, num_q_heads, head_dim, segments),), float("nan"),
                           dtype=torch.float32, device=DEVICE)
    out = batch.empty_out()
    pa.paged_attention(batch.q, batch.k_cache, batch.v_cache, batch.block_table, batch.seq_lens,
                       batch.query_start_loc, out, scale=0.4, config=CONFIG, sliding_window=window,
                       workspace=workspace, segment_stride=stride)
    return workspace, [out[rows] for rows in batch.row_slices]


@SETTINGS
@given(shape_list=shapes, window=windows, stride=st.sampled_from([1, 2, 3, 4]), spare=st.integers(0, 6),
       seed=st.integers(0, 10_000))
def test_strided_programs_store_the_partials_of_one_program_a_segment(shape_list, window, stride, spare, seed):
    """spare: segments on the grid past the longest sequence (what a CUDA graph's max_model_len grid holds)."""
    _, batch = _batch(shape_list, seed, spare)
    one_each, rows_one_each = _partials(batch, 1 << 10, window)   # stride past the grid: a program a segment
    strided, rows_strided = _partials(batch, stride, window)
    assert bitwise_equal(one_each, strided)
    for a, b in zip(rows_one_each, rows_strided):
        assert bitwise_equal(a, b)


@SETTINGS
@given(shape_list=shapes, window=windows, stride=st.sampled_from([2, 3]), seed=st.integers(0, 10_000))
def test_strided_rows_equal_the_fused_rows_and_the_reference(shape_list, window, stride, seed):
    requests, batch = _batch(shape_list, seed)
    strided = run_paged_batch(batch, CONFIG, scale=0.4, sliding_window=window, soft_cap=3.0, segment_stride=stride)
    fused = run_paged_batch(batch, CONFIG, scale=0.4, sliding_window=window, soft_cap=3.0, path="fused")
    for request, a, b in zip(requests, strided, fused):
        assert bitwise_equal(a, b)
        expected = reference_attention(request.queries, request.keys, request.values, request.positions(), scale=0.4,
                                       sliding_window=window, soft_cap=3.0)
        torch.testing.assert_close(a.double().cpu(), expected.cpu(), atol=2e-5, rtol=1e-5)
