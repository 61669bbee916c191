"""Paged attention agrees with an independent fp64 softmax reference (fp32, tolerance stated below)."""

import torch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vosti_plugin.attention.config import AttentionLaunchConfig, select_config
from vosti_plugin.attention.paged_batch import build_paged_batch, random_request, run_paged_batch
from vosti_plugin.integration.reference_attention import reference_attention

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# fp32 inputs, fp32 accumulation, unit-normal q/k/v: observed errors are ~3e-7.
ATOL = 2e-5
RTOL = 1e-5
HEAD_DIM = 16
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tiny_config(queries_per_kv: int) -> AttentionLaunchConfig:
    # segment = 2 tiles, so multi-segment folding happens on sequences of a dozen tokens
    return AttentionLaunchConfig(block_q=2, block_m=2 * queries_per_kv, block_n=4, segment=8, num_warps=4, num_stages=1)


def assert_matches_reference(requests, outputs, scale, window=None, soft_cap=None):
    for request, out in zip(requests, outputs):
        expected = reference_attention(
            request.queries, request.keys, request.values, request.positions(),
            scale=scale, sliding_window=window, soft_cap=soft_cap,
        )
        torch.testing.assert_close(out.double().cpu(), expected.cpu(), atol=ATOL, rtol=RTOL)


request_shapes = st.lists(
    st.integers(1, 40).flatmap(lambda kv: st.tuples(st.just(kv), st.integers(1, kv))), min_size=1, max_size=3
)


@SETTINGS
@given(
    shapes=request_shapes,
    queries_per_kv=st.sampled_from([1, 2, 4]),
    page_size=st.sampled_from([2, 4, 8, 16]),  # 2: pages smaller than a KV tile
    window=st.one_of(st.none(), st.integers(1, 30)),
    soft_cap=st.one_of(st.none(), st.floats(0.5, 10.0)),
    path=st.sampled_from(["split", "fused"]),
    seed=st.integers(0, 1000),
)
def test_batch_matches_fp64_reference(shapes, queries_per_kv, page_size, window, soft_cap, path, seed):
    requests = [
        random_request(kv, q, 2 * queries_per_kv, 2, HEAD_DIM, seed=seed + i, device=DEVICE)
        for i, (kv, q) in enumerate(shapes)
    ]
    batch = build_paged_batch(requests, page_size=page_size, seed=seed, padding_rows=seed % 3)
    outputs = run_paged_batch(
        batch, tiny_config(queries_per_kv), scale=0.3, sliding_window=window, soft_cap=soft_cap, path=path
    )
    assert_matches_reference(requests, outputs, 0.3, window, soft_cap)


def test_production_config_matches_reference_across_segments():
    """A catalog config (segment 512) on a sequence spanning two segments, prefill + decode rows."""
    config = select_config(64, 8, 2, 16, torch.float32)
    requests = [
        random_request(530, 3, 8, 2, 64, seed=1, device=DEVICE),
        random_request(40, 40, 8, 2, 64, seed=2, device=DEVICE),
        random_request(517, 1, 8, 2, 64, seed=3, device=DEVICE),
    ]
    batch = build_paged_batch(requests, page_size=16, seed=5)
    for path in ("split", "fused"):
        outputs = run_paged_batch(batch, config, scale=0.125, path=path)
        assert_matches_reference(requests, outputs, 0.125)


def test_padding_rows_are_not_read_as_tokens():
    """NaN-filled padding rows past query_start_loc[-1] leave every real row finite and correct."""
    requests = [random_request(13, 5, 4, 2, HEAD_DIM, seed=9, device=DEVICE)]
    batch = build_paged_batch(requests, page_size=4, padding_rows=7)
    for path in ("split", "fused"):
        outputs = run_paged_batch(batch, tiny_config(2), scale=0.5, path=path)
        assert torch.isfinite(outputs[0]).all()
        assert_matches_reference(requests, outputs, 0.5)


def test_grid_sized_from_block_table_width_without_max_seqlen():
    """Without max_seqlen_k the segment grid comes from the block table width alone; same result."""
    requests = [random_request(21, 4, 4, 2, HEAD_DIM, seed=4, device=DEVICE)]
    batch = build_paged_batch(requests, page_size=4, spare_table_columns=5)
    bounded = run_paged_batch(batch, tiny_config(2), scale=0.5)
    unbounded = run_paged_batch(batch, tiny_config(2), scale=0.5, max_seqlen_k=None)
    assert torch.equal(bounded[0], unbounded[0])
    assert_matches_reference(requests, unbounded, 0.5)
