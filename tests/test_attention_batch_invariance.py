"""A request's attention rows are bitwise the same whatever batch, page layout or launch path they run in."""

import torch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vosti_plugin.attention.config import AttentionLaunchConfig
from vosti_plugin.attention.paged_batch import bitwise_equal, build_paged_batch, random_request, run_paged_batch

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HEAD_DIM = 16
QUERIES_PER_KV = 2
CONFIG = AttentionLaunchConfig(block_q=2, block_m=2 * QUERIES_PER_KV, block_n=4, segment=8, num_warps=4, num_stages=1)
SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])

kv_and_q = st.integers(1, 36).flatmap(lambda kv: st.tuples(st.just(kv), st.integers(1, kv)))
windows = st.one_of(st.none(), st.integers(1, 20))


def make_request(kv_len, q_len, seed):
    return random_request(kv_len, q_len, 2 * QUERIES_PER_KV, 2, HEAD_DIM, seed=seed, device=DEVICE)


@SETTINGS
@given(
    target=kv_and_q,
    neighbours=st.lists(kv_and_q, max_size=3),
    slot=st.integers(0, 3),
    window=windows,
    path=st.sampled_from(["split", "fused"]),
    page_size=st.sampled_from([2, 4, 8]),  # 2: pages smaller than a KV tile
    seed=st.integers(0, 10_000),
)
def test_request_rows_alone_equal_rows_in_random_batch(target, neighbours, slot, window, path, page_size, seed):
    request = make_request(*target, seed=seed)
    others = [make_request(kv, q, seed=seed + 1 + i) for i, (kv, q) in enumerate(neighbours)]
    position = min(slot, len(others))
    batch_requests = others[:position] + [request] + others[position:]

    alone = run_paged_batch(build_paged_batch([request], page_size=page_size, seed=seed), CONFIG,
                            scale=0.4, sliding_window=window, path=path)[0]
    batched = run_paged_batch(build_paged_batch(batch_requests, page_size=page_size, seed=seed + 7, padding_rows=2),
                              CONFIG, scale=0.4, sliding_window=window, path=path)[position]
    assert bitwise_equal(alone, batched)


@SETTINGS
@given(target=kv_and_q, window=windows, page_size=st.sampled_from([4, 8]), seed=st.integers(0, 10_000))
def test_shuffled_physical_pages_give_identical_rows(target, window, page_size, seed):
    request = make_request(*target, seed=seed)
    neighbour = make_request(9, 2, seed=seed + 1)
    first = build_paged_batch([request, neighbour], page_size=page_size, seed=seed)
    second = build_paged_batch([request, neighbour], page_size=page_size, seed=seed + 1, spare_pages=9,
                               spare_table_columns=4, fused_kv=True)
    assert not torch.equal(first.block_table[0, :2], second.block_table[0, :2]) or target[0] <= page_size
    a = run_paged_batch(first, CONFIG, scale=0.4, sliding_window=window)[0]
    b = run_paged_batch(second, CONFIG, scale=0.4, sliding_window=window)[0]
    assert bitwise_equal(a, b)


@SETTINGS
@given(
    kv_len=st.integers(2, 40),
    cuts=st.lists(st.integers(1, 39), max_size=4),
    window=windows,
    path=st.sampled_from(["split", "fused"]),
    seed=st.integers(0, 10_000),
)
def test_any_chunk_split_of_a_prefill_gives_identical_rows(kv_len, cuts, window, path, seed):
    prompt = make_request(kv_len, kv_len, seed=seed)
    whole = run_paged_batch(build_paged_batch([prompt], page_size=4, seed=seed), CONFIG,
                            scale=0.4, sliding_window=window, path=path)[0]
    bounds = sorted({0, kv_len, *(c for c in cuts if c < kv_len)})
    neighbour = make_request(11, 3, seed=seed + 3)
    for begin, end in zip(bounds[:-1], bounds[1:]):
        chunk = prompt.chunk(begin, end)
        rows = run_paged_batch(build_paged_batch([neighbour, chunk], page_size=4, seed=seed + begin), CONFIG,
                               scale=0.4, sliding_window=window, path=path)[1]
        assert bitwise_equal(rows, whole[begin:end]), (begin, end)


@SETTINGS
@given(target=kv_and_q, window=windows, seed=st.integers(0, 10_000))
def test_split_and_fused_paths_give_identical_rows(target, window, seed):
    requests = [make_request(*target, seed=seed), make_request(17, 5, seed=seed + 1)]
    batch = build_paged_batch(requests, page_size=4, seed=seed)
    split = run_paged_batch(batch, CONFIG, scale=0.4, sliding_window=window, soft_cap=3.0, path="split")
    fused = run_paged_batch(batch, CONFIG, scale=0.4, sliding_window=window, soft_cap=3.0, path="fused")
    for a, b in zip(split, fused):
        assert bitwise_equal(a, b)


@SETTINGS
@given(target=kv_and_q, neighbours=st.lists(kv_and_q, max_size=2), window=windows,
       path=st.sampled_from(["split", "fused"]), seed=st.integers(0, 10_000))
def test_page_size_moves_no_bit(target, neighbours, window, path, seed):
    """The same requests in pages of a KV tile, half a tile (a tile spans pages) and two tiles (a page holds
    tiles): the same rows bit for bit (the tile grid follows positions, not pages)."""
    requests = [make_request(*target, seed=seed)] + [make_request(kv, q, seed=seed + 1 + i)
                                                      for i, (kv, q) in enumerate(neighbours)]
    rows = {page: run_paged_batch(build_paged_batch(requests, page_size=page, seed=seed + page, padding_rows=1),
                                  CONFIG, scale=0.4, sliding_window=window, path=path)
            for page in (CONFIG.block_n // 2, CONFIG.block_n, 2 * CONFIG.block_n)}
    for page in (CONFIG.block_n // 2, 2 * CONFIG.block_n):
        assert all(bitwise_equal(a, b) for a, b in zip(rows[CONFIG.block_n], rows[page]))
