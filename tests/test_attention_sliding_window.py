"""Sliding-window and soft-cap rows: correct near the window edge and invariant to batch and step kind."""

import torch

import pytest

from vosti_plugin.attention.config import AttentionLaunchConfig
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch
from vosti_plugin.integration.reference_attention import reference_attention

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HEAD_DIM = 16
SEGMENT = 8
CONFIG = AttentionLaunchConfig(block_q=2, block_m=4, block_n=4, segment=SEGMENT, num_warps=4, num_stages=1)
ATOL = 2e-5
KV_LEN = 29


def request(seed, kv_len=KV_LEN, q_len=KV_LEN):
    return random_request(kv_len, q_len, 4, 2, HEAD_DIM, seed=seed, device=DEVICE)


# windows: one key, inside a tile, one tile, smaller than a segment, a segment, larger than a segment,
# not a multiple of anything, longer than the sequence; the soft cap (applied to scores before the window's
# mask, so independent of where the window starts) with three of them
WINDOWS = [1, 3, 4, SEGMENT - 1, SEGMENT, SEGMENT + 1, 2 * SEGMENT + 3, 100]


@pytest.mark.parametrize("window, soft_cap", [(w, None) for w in WINDOWS] + [(w, 1.5) for w in (1, SEGMENT + 1, 100)])
def test_window_rows_match_reference_and_decode(window, soft_cap):
    prompt = request(seed=window)
    prefill = run_paged_batch(build_paged_batch([prompt], page_size=4, seed=1), CONFIG,
                              scale=0.35, sliding_window=window, soft_cap=soft_cap)[0]
    expected = reference_attention(prompt.queries, prompt.keys, prompt.values, prompt.positions(),
                                   scale=0.35, sliding_window=window, soft_cap=soft_cap)
    torch.testing.assert_close(prefill.double().cpu(), expected.cpu(), atol=ATOL, rtol=1e-5)

    # rows where the window start crosses a tile / segment boundary, decoded one by one in one batch
    edges = sorted({p for p in range(KV_LEN) if (p - window + 1) % 4 in (0, 1, 3)} | {KV_LEN - 1})[:6]
    steps = [prompt.chunk(p, p + 1) for p in edges]
    decoded = run_paged_batch(build_paged_batch(steps, page_size=4, seed=2), CONFIG,
                              scale=0.35, sliding_window=window, soft_cap=soft_cap)
    for p, row in zip(edges, decoded):
        assert bitwise_equal(row, prefill[p : p + 1]), p


@pytest.mark.parametrize("window", [5, SEGMENT, 13])
def test_window_rows_alone_equal_rows_in_batch(window):
    target = request(seed=3, kv_len=27, q_len=6)
    alone = run_paged_batch(build_paged_batch([target], page_size=8), CONFIG, scale=0.35, sliding_window=window)[0]
    others = [request(seed=4, kv_len=33, q_len=33), request(seed=5, kv_len=7, q_len=1)]
    batched = run_paged_batch(build_paged_batch([others[0], target, others[1]], page_size=8, seed=6), CONFIG,
                              scale=0.35, sliding_window=window)[1]
    assert bitwise_equal(alone, batched)


def test_window_ignores_keys_before_its_start():
    """Changing K/V strictly before a row's window start leaves that row's bits unchanged."""
    window = 6
    prompt = request(seed=8, kv_len=20, q_len=1)
    altered_keys = prompt.keys.clone()
    altered_values = prompt.values.clone()
    altered_keys[: 20 - window] += 1.0
    altered_values[: 20 - window] -= 2.0
    altered = type(prompt)(altered_keys, altered_values, prompt.queries)
    a = run_paged_batch(build_paged_batch([prompt], page_size=4), CONFIG, scale=0.35, sliding_window=window)[0]
    b = run_paged_batch(build_paged_batch([altered], page_size=4), CONFIG, scale=0.35, sliding_window=window)[0]
    assert bitwise_equal(a, b)
    c = run_paged_batch(build_paged_batch([altered], page_size=4), CONFIG, scale=0.35, sliding_window=window + 1)[0]
    assert not torch.equal(a, c)


def test_soft_cap_bounds_scores():
    """With a tiny cap every visible key gets nearly equal weight: output ~ mean of visible V rows."""
    prompt = request(seed=9, kv_len=12, q_len=1)
    out = run_paged_batch(build_paged_batch([prompt], page_size=4), CONFIG, scale=10.0, soft_cap=1e-3)[0]
    mean_v = prompt.values.double().mean(dim=0).repeat_interleave(2, dim=0)
    torch.testing.assert_close(out[0].double().cpu(), mean_v.cpu(), atol=1e-3, rtol=0)
