"""Exact-prefix page cache (pure core, no vLLM): reuse only of pages holding exactly the requested
prefix, immutable shared pages, leaf-only eviction, salted tenants kept apart — also when the
candidate hash collides on everything."""
from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from vosti_plugin.kvcache import (
    ROOT,
    KVCacheAuditError,
    PageCache,
    PageCacheError,
    PageKey,
    ShadowAudit,
    audit_requested,
)

PAGE = 2
NUM_PAGES = 14


def constant_hash(prev, tokens, extra):
    return 0


def weak_hash(prev, tokens, extra):
    return sum(tokens) % 2


def constant_digest(key):
    return b"same"


class _Req:
    def __init__(self, rid: int, tokens: list[int], salt):
        self.rid, self.tokens, self.salt = rid, list(tokens), salt
        self.pages: list[int] = []
        self.match = None  # the prefix match remembered while the request waits


class PageCacheMachine(RuleBasedStateMachine):
    """Drives the page cache like a scheduler does and keeps a model of what each physical page holds.

    `mem[page] = (salt, token prefix)`: the context whose KV the page's slots hold. A page's KV is
    right for a request iff the request's salt and prefix up to the page's end are equal to it.
    """

    candidate_hash = None
    key_digest = None
    chain_cap = None

    @initialize()
    def setup(self):
        kwargs = {} if self.candidate_hash is None else {"candidate_hash": type(self).candidate_hash}
        if self.key_digest is not None:
            kwargs["key_digest"] = type(self).key_digest
        if self.chain_cap is not None:
            kwargs["chain_cap"] = self.chain_cap
        self.cache = PageCache(num_pages=NUM_PAGES, page_size=PAGE, reserved=(0,), **kwargs)
        self.mem: dict[int, tuple] = {}
        self.live: dict[int, _Req] = {}
        self.waiting: list[_Req] = []
        self.next_id = 0
        self.shadow = ShadowAudit(PAGE)

    # ---- helpers ------------------------------------------------------------------------------

    def _page_tokens(self, req: _Req, n: int):
        return [tuple(req.tokens[i * PAGE : (i + 1) * PAGE]) for i in range(n)]

    def _key(self, req: _Req, depth: int) -> PageKey:
        parent = ROOT if depth == 0 else req.pages[depth - 1]
        return PageKey(0, parent, depth, tuple(req.tokens[depth * PAGE : (depth + 1) * PAGE]), (req.salt,))

    def _write(self, req: _Req, start: int, end: int):
        for pos in range(start, end):
            d = pos // PAGE
            page = req.pages[d]
            self.cache.check_writable(page)  # raises on a shared or registered page
            parent = ROOT if d == 0 else req.pages[d - 1]
            self.shadow.on_write(page, 0, d, parent, (req.salt,), pos % PAGE, req.tokens[pos])
            self.mem[page] = (req.salt, tuple(req.tokens[: pos + 1]))
        for d in range(start // PAGE, end // PAGE):
            self.cache.stage(req.pages[d], self._key(req, d))

    def _admit(self, req: _Req) -> bool:
        """Prefix lookup (never covering the last token), then private pages for the rest."""
        max_pages = (len(req.tokens) - 1) // PAGE
        tokens, extras = self._page_tokens(req, max_pages), [(req.salt,)] * max_pages
        hit = self.cache.lookup(0, tokens, extras, max_pages)
        req.match = self.cache.match_prefix(0, tokens, extras, max_pages, previous=req.match)
        assert req.match.pages == hit, "a resumed match differs from a fresh lookup"
        for d, p in enumerate(hit):
            assert self.mem[p] == (req.salt, tuple(req.tokens[: (d + 1) * PAGE])), "reused a page with other KV"
        need = -(-len(req.tokens) // PAGE) - len(hit)
        evictable_hits = sum(1 for p in hit if self.cache.ref(p) == 0)
        if need + evictable_hits > self.cache.num_free():
            return False
        self.cache.acquire(hit)
        req.match = None
        req.pages = list(hit)
        for d, p in enumerate(hit):
            self.shadow.on_reuse(p, self._key(req, d))
        fresh = self.cache.allocate(need)
        self.shadow.on_allocate(fresh)
        req.pages += fresh
        self._write(req, len(hit) * PAGE, len(req.tokens))
        self.live[req.rid] = req
        return True

    def _release(self, req: _Req):
        self.cache.release(reversed(req.pages))
        req.pages = []
        del self.live[req.rid]

    # ---- rules --------------------------------------------------------------------------------

    @rule(
        prompt=st.lists(st.integers(1, 2), min_size=1, max_size=9),
        salt=st.sampled_from([None, None, "tenant-b"]),
        reuse=st.booleans(),
    )
    def new_request(self, prompt, salt, reuse):
        if reuse and self.live:
            # Continue an existing request's context: the common prefix-reuse shape.
            other = self.live[min(self.live)]
            prompt = other.tokens[: len(other.tokens) // 2 + 1] + prompt[:3]
        req = _Req(self.next_id, prompt, salt)
        self.next_id += 1
        if not self._admit(req):
            self.waiting.append(req)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), token=st.integers(1, 2))
    def decode(self, data, token):
        req = data.draw(st.sampled_from(sorted(self.live)))
        req = self.live[req]
        if len(req.tokens) % PAGE == 0:
            if self.cache.num_free() == 0:
                return
            fresh = self.cache.allocate(1)
            self.shadow.on_allocate(fresh)
            req.pages += fresh
        req.tokens.append(token)
        self._write(req, len(req.tokens) - 1, len(req.tokens))

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def finish(self, data):
        self._release(self.live[data.draw(st.sampled_from(sorted(self.live)))])

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def preempt(self, data):
        """Preemption by recompute: drop every page, re-queue with prompt + generated tokens."""
        req = self.live[data.draw(st.sampled_from(sorted(self.live)))]
        self._release(req)
        self.waiting.insert(0, req)

    @precondition(lambda self: self.waiting)
    @rule()
    def resume_first_waiting(self):
        if self._admit(self.waiting[0]):
            self.waiting.pop(0)

    @rule()
    def end_step(self):
        for p in self.cache.publish():
            self.shadow.on_register(p, self.cache.key(p))

    @rule(junk=st.integers(100, 200))
    def memory_pressure(self, junk):
        """Take every free page (evicting all it can) and overwrite it, then give them back."""
        before = {p: self.cache.key(p) for p in self.cache.registered_pages()}
        pages = self.cache.allocate(self.cache.num_free())
        self.shadow.on_allocate(pages)
        for p in pages:
            self.mem[p] = ("junk", (junk, p))
        for p, key in before.items():
            if p in pages:
                assert all(other.parent != p for q, other in before.items() if q not in pages), (
                    f"page {p} was recycled under a retained child"
                )
        self.cache.release(pages)

    @precondition(lambda self: not self.live)
    @rule()
    def reset_prefix_cache(self):
        assert self.cache.reset()
        self.shadow.on_forget(range(NUM_PAGES))

    # ---- invariants ---------------------------------------------------------------------------

    @invariant()
    def structures_consistent(self):
        self.cache.audit()

    @invariant()
    def registered_pages_hold_their_exact_prefix(self):
        for p in self.cache.registered_pages():
            key = self.cache.key(p)
            salt, prefix = self.mem[p]
            assert (salt,) == key.extra
            assert len(prefix) == (key.depth + 1) * PAGE and prefix[-PAGE:] == key.tokens
            if key.parent != ROOT:
                assert self.mem[key.parent] == (salt, prefix[:-PAGE]), "registered under a foreign parent"

    @invariant()
    def live_pages_hold_their_requests_context(self):
        for req in self.live.values():
            for d, p in enumerate(req.pages):
                end = min((d + 1) * PAGE, len(req.tokens))
                assert self.mem[p] == (req.salt, tuple(req.tokens[:end]))

    @invariant()
    def references_count_holders(self):
        held: dict[int, int] = {}
        for req in self.live.values():
            for p in req.pages:
                held[p] = held.get(p, 0) + 1
        for p in range(1, NUM_PAGES):
            assert self.cache.ref(p) == held.get(p, 0)
        assert self.cache.num_free() == NUM_PAGES - 1 - len(held)


class CollidingHashMachine(PageCacheMachine):
    candidate_hash = staticmethod(constant_hash)


class WeakHashMachine(PageCacheMachine):
    candidate_hash = staticmethod(weak_hash)


class CollidingDigestMachine(PageCacheMachine):
    """Hash and digest collide on everything and every bucket is digest-indexed: only the exact key
    check stands between a lookup and a wrong page."""

    candidate_hash = staticmethod(constant_hash)
    key_digest = staticmethod(constant_digest)
    chain_cap = 0


class DigestIndexedMachine(PageCacheMachine):
    candidate_hash = staticmethod(constant_hash)
    chain_cap = 0


# 5 machines x 50 examples x up to 50 steps (measured: ~2,250 executed steps per machine).
_STATEFUL = settings(max_examples=50, stateful_step_count=50, deadline=None)
TestPageCacheStateMachine = PageCacheMachine.TestCase
TestPageCacheStateMachineConstantHash = CollidingHashMachine.TestCase
TestPageCacheStateMachineWeakHash = WeakHashMachine.TestCase
TestPageCacheStateMachineConstantDigest = CollidingDigestMachine.TestCase
TestPageCacheStateMachineDigestIndexed = DigestIndexedMachine.TestCase
for _case in (
    TestPageCacheStateMachine,
    TestPageCacheStateMachineConstantHash,
    TestPageCacheStateMachineWeakHash,
    TestPageCacheStateMachineConstantDigest,
    TestPageCacheStateMachineDigestIndexed,
):
    _case.settings = _STATEFUL
del _case


# ---- targeted properties ------------------------------------------------------------------------


def _register_chain(cache: PageCache, pages_tokens, extra=None, group=0):
    pages = cache.allocate(len(pages_tokens))
    parent = ROOT
    for d, (p, toks) in enumerate(zip(pages, pages_tokens)):
        cache.stage(p, PageKey(group, parent, d, tuple(toks), extra))
        parent = p
    cache.publish()
    return pages


def test_constant_hash_collision_never_causes_reuse():
    cache = PageCache(num_pages=16, page_size=2, candidate_hash=constant_hash)
    a = _register_chain(cache, [(1, 2), (3, 4)])
    assert cache.lookup(0, [(1, 2), (3, 4)]) == a
    assert cache.lookup(0, [(1, 2), (3, 5)]) == a[:1]  # divergent second page
    assert cache.lookup(0, [(3, 4)]) == []  # right tokens, wrong depth and parent
    assert cache.lookup(0, [(1, 2)], [("salt",)]) == []  # other tenant
    assert cache.lookup(1, [(1, 2)]) == []  # other KV cache group
    b = _register_chain(cache, [(9, 9), (3, 4)])
    assert cache.lookup(0, [(9, 9), (3, 4)]) == b  # same tokens at depth 1, other physical parent
    assert cache.lookup(0, [(1, 2), (3, 4)]) == a
    cache.audit()


def test_equal_key_is_registered_once():
    cache = PageCache(num_pages=8, page_size=2)
    first = _register_chain(cache, [(1, 1)])
    dup = cache.allocate(1)
    cache.stage(dup[0], PageKey(0, ROOT, 0, (1, 1)))
    assert cache.publish() == []  # the duplicate stays private
    assert not cache.is_registered(dup[0]) and cache.lookup(0, [(1, 1)]) == first


def test_staged_pages_are_invisible_until_published():
    cache = PageCache(num_pages=8, page_size=2)
    (p,) = cache.allocate(1)
    cache.stage(p, PageKey(0, ROOT, 0, (5, 6)))
    assert cache.lookup(0, [(5, 6)]) == []
    cache.publish()
    assert cache.lookup(0, [(5, 6)]) == [p]


def test_page_freed_before_publish_is_never_registered():
    cache = PageCache(num_pages=4, page_size=2)
    (p,) = cache.allocate(1)
    cache.stage(p, PageKey(0, ROOT, 0, (5, 6)))
    cache.release([p])
    cache.allocate(1)  # another owner may take it and write other KV
    assert cache.publish() == [] and cache.lookup(0, [(5, 6)]) == []


def test_registered_and_shared_pages_are_immutable():
    cache = PageCache(num_pages=8, page_size=2)
    (p,) = _register_chain(cache, [(1, 2)])
    with pytest.raises(PageCacheError):
        cache.check_writable(p)
    with pytest.raises(PageCacheError):
        cache.stage(p, PageKey(0, ROOT, 0, (1, 2)))
    (q,) = cache.allocate(1)
    with pytest.raises(PageCacheError):
        cache.stage(q, PageKey(0, ROOT, 0, (1,)))  # only full pages become shareable


def test_eviction_takes_only_unreferenced_leaves():
    cache = PageCache(num_pages=5, page_size=1)  # pages 1..4 usable
    chain = _register_chain(cache, [(1,), (2,), (3,)])
    side = _register_chain(cache, [(7,)])
    cache.release(reversed(chain))
    cache.release(side)
    cache.acquire(chain[:2])  # a request holds the first two pages of the chain
    (victim,) = cache.allocate(1)
    assert victim in (chain[2], side[0])
    (victim2,) = cache.allocate(1)
    assert {victim, victim2} == {chain[2], side[0]}  # never a held page, never a parent
    assert cache.num_free() == 0
    with pytest.raises(PageCacheError):
        cache.allocate(1)
    cache.release([victim, victim2])
    cache.release(reversed(chain[:2]))
    assert cache.num_free() == 4 and cache.lookup(0, [(1,), (2,)]) == chain[:2]
    cache.audit()


def test_parent_becomes_evictable_after_its_last_child():
    cache = PageCache(num_pages=3, page_size=1)
    a, b = _register_chain(cache, [(1,), (2,)])
    cache.release([b, a])
    assert cache.allocate(1) == [b]
    assert cache.lookup(0, [(1,), (2,)]) == [a]
    assert cache.allocate(1) == [a]
    assert cache.lookup(0, [(1,)]) == []
    cache.audit()


def test_hit_statistics_count_queries_hits_and_tokens():
    cache = PageCache(num_pages=4, page_size=2)
    cache.stats.record(10, 0)
    cache.stats.record(10, 4)
    assert (cache.stats.queries, cache.stats.hits, cache.stats.query_tokens, cache.stats.hit_tokens) == (2, 1, 20, 4)
    assert cache.stats.hit_rate == pytest.approx(0.2)


def test_audit_shadow_stops_writes_into_registered_pages():
    shadow = ShadowAudit(page_size=2)
    shadow.on_allocate([3])
    shadow.on_write(3, 0, 0, ROOT, None, 0, 11)
    shadow.on_write(3, 0, 0, ROOT, None, 1, 12)
    shadow.on_register(3, PageKey(0, ROOT, 0, (11, 12)))
    shadow.on_reuse(3, PageKey(0, ROOT, 0, (11, 12)))
    with pytest.raises(KVCacheAuditError):
        shadow.on_write(3, 0, 0, ROOT, None, 1, 12)
    with pytest.raises(KVCacheAuditError):
        shadow.on_reuse(3, PageKey(0, ROOT, 0, (11, 13)))
    shadow.on_allocate([4])
    shadow.on_write(4, 0, 1, 3, None, 0, 1)
    with pytest.raises(KVCacheAuditError):
        shadow.on_write(4, 0, 1, 9, None, 1, 1)  # same page, other lineage
    with pytest.raises(KVCacheAuditError):
        shadow.on_register(4, PageKey(0, 3, 1, (1, 1)))  # slot 1 never written


def test_audit_is_switched_on_by_env_or_additional_config(monkeypatch):
    monkeypatch.delenv("VOSTI_AUDIT", raising=False)
    assert not audit_requested(None) and not audit_requested({"vosti": {"audit": False}})
    assert audit_requested({"vosti": {"audit": True}})
    monkeypatch.setenv("VOSTI_AUDIT", "1")
    assert audit_requested({})
