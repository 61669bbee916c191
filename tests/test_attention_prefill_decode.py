"""A row computed inside a prefill equals the same position computed by a decode step, bitwise."""

import torch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vosti_plugin.attention.config import AttentionLaunchConfig
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HEAD_DIM = 16
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def config_for(queries_per_kv):
    return AttentionLaunchConfig(block_q=2, block_m=2 * queries_per_kv, block_n=4, segment=8, num_warps=4, num_stages=1)


@SETTINGS
@given(
    kv_len=st.integers(1, 40),
    data=st.data(),
    queries_per_kv=st.sampled_from([1, 2, 4]),
    window=st.one_of(st.none(), st.integers(1, 24)),
    soft_cap=st.one_of(st.none(), st.just(2.5)),
    prefill_path=st.sampled_from(["split", "fused"]),
    decode_path=st.sampled_from(["split", "fused"]),
    seed=st.integers(0, 10_000),
)
def test_prefill_row_equals_decode_row(kv_len, data, queries_per_kv, window, soft_cap, prefill_path, decode_path, seed):
    config = config_for(queries_per_kv)
    prompt = random_request(kv_len, kv_len, 2 * queries_per_kv, 2, HEAD_DIM, seed=seed, device=DEVICE)
    prefill = run_paged_batch(build_paged_batch([prompt], page_size=8, seed=seed), config,
                              scale=0.3, sliding_window=window, soft_cap=soft_cap, path=prefill_path)[0]
    positions = data.draw(st.lists(st.integers(0, kv_len - 1), min_size=1, max_size=3, unique=True))
    # decode steps of several requests batched together, each at its own position
    steps = [prompt.chunk(p, p + 1) for p in positions]
    neighbour = random_request(15, 1, 2 * queries_per_kv, 2, HEAD_DIM, seed=seed + 1, device=DEVICE)
    decoded = run_paged_batch(build_paged_batch(steps + [neighbour], page_size=8, seed=seed + 2), config,
                              scale=0.3, sliding_window=window, soft_cap=soft_cap, path=decode_path)
    for p, row in zip(positions, decoded):
        assert bitwise_equal(row, prefill[p : p + 1]), p
