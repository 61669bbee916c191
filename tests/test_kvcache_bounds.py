"""Bounds of the exact-prefix page cache (pure core, no vLLM): memory bounded by the pool whatever the
workload (10^6 requests on a hot prefix), lookup work independent of candidate-hash collision chains
(counted in exact-key comparisons, not timed), eviction order unchanged by heap compaction, and a
resumed prefix match always equal to a fresh lookup (also after eviction and reset)."""
from __future__ import annotations

import random

import pytest

from vosti_plugin.kvcache import ROOT, PageCache, PageKey
from vosti_plugin.kvcache.page_cache import HEAP_SLACK
from vosti_plugin.kvcache.page_index import CHAIN_CAP

PAGE = 4


def constant_hash(prev, tokens, extra):
    return 0


def _register_chain(cache: PageCache, pages_tokens, parent=ROOT, first_depth=0, extra=None):
    pages = cache.allocate(len(pages_tokens))
    for d, (p, toks) in enumerate(zip(pages, pages_tokens), start=first_depth):
        cache.stage(p, PageKey(0, parent, d, tuple(toks), extra))
        parent = p
    cache.publish()
    return pages


def _bound(cache: PageCache) -> int:
    return 2 * cache.num_pages + HEAP_SLACK


def test_a_million_requests_on_a_hot_prefix_keep_every_structure_bounded():
    """The hot prefix's last page drops to zero references once per request; before #21 each drop left a
    stale leaf-heap entry that only eviction removed (1,000,001 entries after 10^6 requests)."""
    cache = PageCache(num_pages=16, page_size=PAGE)
    hot = _register_chain(cache, [(1, 2, 3, 4), (5, 6, 7, 8)])
    cache.release(reversed(hot))
    query = [(1, 2, 3, 4), (5, 6, 7, 8), (9, 9, 9, 9)]
    largest = {}
    for i in range(1_000_000):
        cache.acquire(hot)
        if i % 1000 == 0:  # the whole request shape now and then: lookup, private tail, release
            assert cache.lookup(0, query) == hot
            tail = cache.allocate(1)
            cache.release(tail)
            for name, size in cache.structure_sizes().items():
                largest[name] = max(largest.get(name, 0), size)
        cache.release(reversed(hot))
    for name, size in cache.structure_sizes().items():
        largest[name] = max(largest.get(name, 0), size)
    assert all(size <= _bound(cache) for size in largest.values()), largest
    assert largest["leaf_heap"] <= 2 * 1 + HEAP_SLACK + 1
    assert cache.stats.evictions == 0
    cache.audit()


def test_compaction_keeps_lru_eviction_order():
    cache = PageCache(num_pages=12, page_size=1)
    rng = random.Random(3)
    roots = [_register_chain(cache, [(t,)])[0] for t in range(1, 11)]  # 10 depth-0 pages, 1 page left free
    cache.release(roots)
    release_order = list(roots)
    for _ in range(5000):  # churn: re-reference random leaves and drop them again
        p = rng.choice(roots)
        cache.acquire([p])
        cache.release([p])
        release_order.remove(p)
        release_order.append(p)
    assert cache.structure_sizes()["leaf_heap"] <= 2 * 10 + HEAP_SLACK
    evicted = cache.allocate(cache.num_free())
    assert evicted[1:] == release_order  # evicted[0] is the one private free page
    cache.audit()


@pytest.mark.parametrize("chain", [250, 2000])
def test_lookup_of_a_colliding_chain_compares_each_page_once(chain):
    """Constant candidate hash: every page collides. Before #21 a lookup scanned the whole bucket at
    every depth (chain^2 / 2 key comparisons); now one bucket per (hash, parent, depth)."""
    cache = PageCache(num_pages=chain + 2, page_size=PAGE, candidate_hash=constant_hash)
    rng = random.Random(chain)
    tokens = [tuple(rng.randrange(3, 500) for _ in range(PAGE)) for _ in range(chain)]
    pages = _register_chain(cache, tokens)
    compared = _count_key_comparisons(cache)
    assert cache.lookup(0, tokens) == pages
    assert compared["n"] <= chain
    assert cache.lookup(0, tokens[:-1] + [(1, 1, 1, 1)]) == pages[:-1]


def test_colliding_siblings_are_found_through_the_digest_index():
    """2,000 continuations of one first page, all with one candidate hash: the bucket is re-indexed by
    the keyed digest, so a lookup compares one sibling, not 2,000."""
    n = 2000
    cache = PageCache(num_pages=n + 2, page_size=PAGE, candidate_hash=constant_hash)
    (root,) = _register_chain(cache, [(1, 2, 3, 4)])
    rng = random.Random(9)
    tails = list({tuple(rng.randrange(3, 500) for _ in range(PAGE)) for _ in range(n)})
    children = [_register_chain(cache, [t], parent=root, first_depth=1)[0] for t in tails]
    assert cache._index.longest_scan() <= 1
    compared = _count_key_comparisons(cache)
    for i in rng.sample(range(len(tails)), 50):
        assert cache.lookup(0, [(1, 2, 3, 4), tails[i]]) == [root, children[i]]
    assert compared["n"] <= 50 * 2
    assert cache.lookup(0, [(1, 2, 3, 4), (0, 0, 0, 0)]) == [root]
    cache.audit()


def test_small_sibling_buckets_stay_lists_until_the_cap():
    cache = PageCache(num_pages=CHAIN_CAP + 4, page_size=PAGE, candidate_hash=constant_hash)
    (root,) = _register_chain(cache, [(1, 2, 3, 4)])
    for t in range(CHAIN_CAP):
        _register_chain(cache, [(t, t, t, t)], parent=root, first_depth=1)
    assert cache.structure_sizes()["index_digests"] == 0
    _register_chain(cache, [(99, 99, 99, 99)], parent=root, first_depth=1)
    assert cache.structure_sizes()["index_digests"] == CHAIN_CAP + 1
    cache.audit()


def _count_key_comparisons(cache: PageCache) -> dict:
    counter = {"n": 0}
    key_of = cache._index._key_of

    def counting(page):
        counter["n"] += 1
        return key_of(page)

    cache._index._key_of = counting
    return counter


def test_resumed_match_follows_eviction_extension_and_reset():
    cache = PageCache(num_pages=8, page_size=1)
    prompt = [(t,) for t in (1, 2, 3, 4, 5)]
    chain = _register_chain(cache, prompt[:3])
    cache.release(reversed(chain))
    match = cache.match_prefix(0, prompt)
    assert match.pages == chain
    # extension: a page published after the match is found by the resumed walk
    (fourth,) = _register_chain(cache, prompt[3:4], parent=chain[-1], first_depth=3)
    cache.release([fourth])
    match = cache.match_prefix(0, prompt, previous=match)
    assert match.pages == chain + [fourth] == cache.lookup(0, prompt)
    # eviction of the tail (the only evictable page of the chain): the resumed walk drops it
    cache.acquire(chain)
    pages = cache.allocate(cache.num_free())
    assert fourth in pages
    match = cache.match_prefix(0, prompt, previous=match)
    assert match.pages == chain == cache.lookup(0, prompt)
    # the evicted page id re-registered under another key must not look like the old tail
    cache.release(pages)
    cache.release(reversed(chain))
    assert cache.reset()
    other = _register_chain(cache, [(7,), (8,)])
    assert cache.match_prefix(0, prompt, previous=match).pages == [] == cache.lookup(0, prompt)
    assert cache.lookup(0, [(7,), (8,)]) == other


def test_resumed_matches_equal_fresh_lookups_under_random_churn():
    rng = random.Random(21)
    cache = PageCache(num_pages=24, page_size=1, candidate_hash=constant_hash, chain_cap=2)
    prompts = [[(rng.randrange(1, 3),) for _ in range(rng.randrange(1, 7))] for _ in range(12)]
    remembered = {i: None for i in range(len(prompts))}
    held: list[list[int]] = []
    for step in range(3000):
        i = rng.randrange(len(prompts))
        fresh = cache.lookup(0, prompts[i])
        remembered[i] = cache.match_prefix(0, prompts[i], previous=remembered[i])
        assert remembered[i].pages == fresh, f"step {step}"
        action = rng.random()
        if action < 0.45 and cache.num_free() >= len(prompts[i]) - len(fresh) + sum(cache.ref(p) == 0 for p in fresh):
            cache.acquire(fresh)
            pages = fresh + cache.allocate(len(prompts[i]) - len(fresh))
            parent = fresh[-1] if fresh else ROOT
            for d in range(len(fresh), len(pages)):
                cache.stage(pages[d], PageKey(0, parent, d, prompts[i][d]))
                parent = pages[d]
            cache.publish()
            held.append(pages)
        elif action < 0.8 and held:
            cache.release(reversed(held.pop(rng.randrange(len(held)))))
        elif action < 0.95:
            junk = cache.allocate(rng.randrange(0, cache.num_free() + 1))
            cache.release(junk)
        elif not held:
            assert cache.reset()
    cache.audit()
