"""A step cut into launches of at most C tokens (split-path workspace bound) gives the same bits per row
as one launch of the whole step."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vosti_plugin.attention.config import AttentionLaunchConfig
from vosti_plugin.attention.paged_attention import paged_attention
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch
from vosti_plugin.attention.sub_launch import plan, run_in_launches

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CONFIG = AttentionLaunchConfig(block_q=2, block_m=4, block_n=4, segment=8, num_warps=4, num_stages=1)


@given(q_lens=st.lists(st.integers(0, 40), min_size=1, max_size=8), capacity=st.integers(1, 50))
def test_plan_covers_every_token_once_in_order_within_capacity(q_lens, capacity):
    starts = [0]
    for n in q_lens:
        starts.append(starts[-1] + n)
    launches = plan(starts, capacity)
    covered = [(p.seq, row) for pieces in launches for p in pieces for row in range(p.begin, p.end)]
    assert covered == [(s, row) for s, n in enumerate(q_lens) for row in range(n)]
    for pieces in launches:
        assert 1 <= sum(p.end - p.begin for p in pieces) <= capacity
        assert all(p.trim == q_lens[p.seq] - p.end for p in pieces)
    assert all(sum(p.end - p.begin for p in pieces) == capacity for pieces in launches[:-1])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(st.integers(1, 30).flatmap(lambda kv: st.tuples(st.just(kv), st.integers(1, kv))),
                    min_size=1, max_size=3),
    capacity=st.integers(1, 12),
    window=st.one_of(st.none(), st.integers(1, 12)),
    seed=st.integers(0, 10_000),
)
def test_step_in_launches_of_at_most_c_tokens_equals_one_launch(shapes, capacity, window, seed):
    requests = [random_request(kv, q, 4, 2, 16, seed=seed + i, device=DEVICE) for i, (kv, q) in enumerate(shapes)]
    batch = build_paged_batch(requests, page_size=8, seed=seed, padding_rows=1)
    whole = run_paged_batch(batch, CONFIG, scale=0.4, sliding_window=window, path="split")

    out = batch.empty_out()

    def launch(q, o, block_table, seq_lens, query_start_loc):
        paged_attention(q, batch.k_cache, batch.v_cache, block_table, seq_lens, query_start_loc, o, scale=0.4,
                        config=CONFIG, sliding_window=window, max_seqlen_k=batch.max_seqlen_k, path="split")

    run_in_launches(launch, batch.q, out, batch.block_table, batch.seq_lens, batch.query_start_loc.tolist(),
                    capacity)
    for rows, expected in zip(batch.row_slices, whole):
        assert bitwise_equal(out[rows], expected)
    assert torch.count_nonzero(out[batch.row_slices[-1].stop:]) == 0, "padding rows must be zero"


def test_deployment_path_keeps_split_for_long_context_and_big_budget():
    from vosti_plugin.attention.sub_launch import deployment_path

    llama = dict(page_size=64, segment=512, num_q_heads=32, head_dim=128)
    path, capacity = deployment_path(max_num_tokens=8192, max_graph_tokens=512, max_model_len=33024,
                                     limit_bytes=2 << 30, **llama)
    assert path == "split" and 512 <= capacity < 8192   # big prefill steps run in several launches
    assert deployment_path(max_num_tokens=2048, max_graph_tokens=512, max_model_len=20000, limit_bytes=2 << 30,
                           **llama) == ("split", 2048)
    assert deployment_path(max_num_tokens=8192, max_graph_tokens=512, max_model_len=131072, limit_bytes=1 << 30,
                           **llama) == ("fused", 0)           # a graph step would not fit one launch
    assert deployment_path(max_num_tokens=64, max_graph_tokens=1, max_model_len=256, limit_bytes=0,
                           page_size=32, segment=512, num_q_heads=4, head_dim=32) == ("fused", 0)


def test_deployment_path_stretches_the_budget_to_one_graph_step():
    from vosti_plugin.attention.sub_launch import deployment_path

    llama = dict(page_size=64, segment=512, num_q_heads=32, head_dim=128)
    # Llama-3.1's default 128K context: a 512-token graph step needs 2.18 GB of partials, over the 2 GiB budget
    assert deployment_path(max_num_tokens=2048, max_graph_tokens=512, max_model_len=131072, limit_bytes=2 << 30,
                           **llama) == ("fused", 0)
    assert deployment_path(max_num_tokens=2048, max_graph_tokens=512, max_model_len=131072, limit_bytes=2 << 30,
                           stretch_bytes=7 << 30, **llama) == ("split", 512)
    # the stretch covers one graph step, no more: it never takes memory a smaller budget already covers
    assert deployment_path(max_num_tokens=2048, max_graph_tokens=512, max_model_len=20000, limit_bytes=2 << 30,
                           stretch_bytes=7 << 30, **llama) == ("split", 2048)
    assert deployment_path(max_num_tokens=2048, max_graph_tokens=512, max_model_len=131072, limit_bytes=2 << 30,
                           stretch_bytes=2 << 30, **llama) == ("fused", 0)


def test_split_workspace_share_reads_the_environment(monkeypatch):
    import pytest

    from vosti_plugin.vllm import attention_backend as backend

    monkeypatch.delenv("VOSTI_SPLIT_WORKSPACE_SHARE", raising=False)
    assert backend.split_workspace_share() == backend.SPLIT_WORKSPACE_MAX_SHARE
    monkeypatch.setenv("VOSTI_SPLIT_WORKSPACE_SHARE", "0")
    assert backend.split_workspace_share() == 0.0
    for bad in ("1.5", "-0.1", "lots"):
        monkeypatch.setenv("VOSTI_SPLIT_WORKSPACE_SHARE", bad)
        with pytest.raises(ValueError, match="VOSTI_SPLIT_WORKSPACE_SHARE"):
            backend.split_workspace_share()
