"""Exact-prefix page cache: the pure-Python core of the vosti KV block manager (no vLLM imports).

A page is a fixed-size run of KV slots. A *registered* page is identified by its `PageKey`:
(KV cache group, physical parent page, depth, exact token tuple, extra keys). The extra keys carry
everything besides tokens that changes the KV (cache salt, LoRA, multimodal hashes), so they keep
tenants apart. A rolling hash over (previous hash, tokens, extra) only *finds candidates*; a page is
reused only when its whole key is equal, so a hash collision can never cause reuse. `PageIndex`
re-indexes a long collision chain by a keyed digest, so collisions cannot make lookups slow either.

Rules this module enforces (docs/design.md, "Cache rules"):
- Registered pages are immutable: `check_writable` refuses them; new KV goes to private pages.
- A page becomes shareable only when full, and only through `stage()` + `publish()`: pages staged
  during a scheduler step become visible to lookups after the step's lookups are done.
- Eviction takes only unreferenced registered *leaves* (no registered children), so a parent's id
  cannot be recycled under a retained child; a leaf's parent becomes evictable after it.
- Every holder of a page also holds the page's whole ancestor chain (callers keep this; `audit()`
  checks it), so every unreferenced page is reclaimable by evicting leaves first.

Memory is bounded by the pool whatever the workload: the lazy LRU heap of evictable leaves is
compacted once its stale entries outnumber its live ones (`structure_sizes()` reports every
structure's size).
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from vosti_plugin.kvcache.page_index import CHAIN_CAP, KeyDigest, PageIndex, keyed_digest
from vosti_plugin.kvcache.page_key import ROOT, PageKey

__all__ = ["ROOT", "PageCache", "PageCacheError", "PageKey", "PrefixHitStats", "PrefixMatch", "rolling_hash"]

HEAP_SLACK = 64
"""Stale leaf-heap entries tolerated beyond the live ones before the heap is rebuilt."""

CandidateHash = Callable[[int, tuple[int, ...], Hashable], int]


def rolling_hash(prev: int, tokens: tuple[int, ...], extra: Hashable) -> int:
    """Default candidate hash: Python's tuple hash chained over the prefix (process-local)."""
    return hash((prev, tokens, extra))


@dataclass
class PrefixHitStats:
    """Prefix-cache counters: one query per admitted request (a first allocation, also after a
    preemption), hits = queries with >= 1 reused page; evictions = registered pages recycled."""

    queries: int = 0
    hits: int = 0
    query_tokens: int = 0
    hit_tokens: int = 0
    evictions: int = 0

    def record(self, num_query_tokens: int, num_hit_tokens: int) -> None:
        self.queries += 1
        self.query_tokens += num_query_tokens
        self.hit_tokens += num_hit_tokens
        if num_hit_tokens > 0:
            self.hits += 1

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0


class PageCacheError(RuntimeError):
    """The page cache was asked to do something its rules forbid (a caller bug)."""


@dataclass
class PrefixMatch:
    """A lookup's result that a later lookup of the same request can resume from (`match_prefix`).

    Valid while `pages[-1]` keeps the registration it had (`serial`): eviction takes only leaves, so
    the ancestors of a still-registered page are still registered, under the same keys.
    """

    group: int
    pages: list[int]
    serial: int = 0


@dataclass
class _Page:
    ref: int = 0
    key: PageKey | None = None
    hash: int = 0
    children: int = 0
    tick: int = 0
    serial: int = 0


@dataclass
class PageCache:
    num_pages: int
    page_size: int
    reserved: tuple[int, ...] = (0,)
    candidate_hash: CandidateHash = rolling_hash
    stats: PrefixHitStats = field(default_factory=PrefixHitStats)
    key_digest: KeyDigest = keyed_digest
    chain_cap: int = CHAIN_CAP

    def __post_init__(self) -> None:
        if self.page_size <= 0 or self.num_pages <= len(self.reserved):
            raise ValueError("need page_size > 0 and more pages than reserved ones")
        self._pages = [_Page() for _ in range(self.num_pages)]
        self._reserved = frozenset(self.reserved)
        # Unregistered unreferenced pages, reused LIFO.
        self._free_private: list[int] = [p for p in reversed(range(self.num_pages)) if p not in self._reserved]
        self._free_private_set = set(self._free_private)
        # Registered unreferenced leaves as a lazy min-heap of (tick, page); valid iff in _leaves.
        self._leaf_heap: list[tuple[int, int]] = []
        self._leaves: dict[int, int] = {}
        self._retained_unreferenced = 0
        self._index = PageIndex(self.key, self.key_digest, self.chain_cap)
        self._num_registered = 0
        self._staged: dict[int, PageKey] = {}
        self._clock = 0
        self._serial = 0

    # ---- queries -------------------------------------------------------------------------

    def num_free(self) -> int:
        """Pages `allocate` can hand out now: private free pages + unreferenced registered pages."""
        return len(self._free_private) + self._retained_unreferenced

    def ref(self, page: int) -> int:
        return self._pages[page].ref

    def key(self, page: int) -> PageKey | None:
        return self._pages[page].key

    def is_registered(self, page: int) -> bool:
        return self._pages[page].key is not None

    def is_staged(self, page: int) -> bool:
        return page in self._staged

    def num_children(self, page: int) -> int:
        return self._pages[page].children

    def registered_pages(self) -> list[int]:
        return [p for p, st in enumerate(self._pages) if st.key is not None]

    def lookup(
        self,
        group: int,
        page_tokens: Sequence[tuple[int, ...]],
        page_extras: Sequence[Hashable] | None = None,
        max_pages: int | None = None,
        previous: PrefixMatch | None = None,
    ) -> list[int]:
        """Longest chain of registered pages whose keys equal the given prefix, page by page.

        `page_tokens[i]` holds the tokens of page i (only full pages are considered). Acquires nothing.
        `previous`: see `match_prefix`.
        """
        return self.match_prefix(group, page_tokens, page_extras, max_pages, previous).pages

    def match_prefix(
        self,
        group: int,
        page_tokens: Sequence[tuple[int, ...]],
        page_extras: Sequence[Hashable] | None = None,
        max_pages: int | None = None,
        previous: PrefixMatch | None = None,
    ) -> PrefixMatch:
        """`lookup` that resumes from `previous` (an earlier match of the same token sequence) when it
        is still valid, so only pages past it are hashed and compared; the result equals a fresh lookup."""
        limit = len(page_tokens) if max_pages is None else min(max_pages, len(page_tokens))
        found: list[int] = []
        if previous is not None and previous.group == group and self._still_registered(previous):
            found = previous.pages[:limit]
        parent = found[-1] if found else ROOT
        h = self._pages[parent].hash if found else 0
        for depth in range(len(found), limit):
            tokens = tuple(page_tokens[depth])
            if len(tokens) != self.page_size:
                break
            extra = page_extras[depth] if page_extras is not None else None
            h = self.candidate_hash(h, tokens, extra)
            match = self._index.find(h, PageKey(group, parent, depth, tokens, extra))
            if match is None:
                break
            found.append(match)
            parent = match
        return self.remember_match(group, found)

    def remember_match(self, group: int, pages: list[int]) -> PrefixMatch:
        """A `PrefixMatch` of pages a lookup returned now (valid until its last page is evicted)."""
        return PrefixMatch(group, list(pages), self._pages[pages[-1]].serial if pages else 0)

    def _still_registered(self, match: PrefixMatch) -> bool:
        if not match.pages:
            return True
        st = self._pages[match.pages[-1]]
        return st.key is not None and st.serial == match.serial

    def page_hash(self, page: int) -> int:
        return self._pages[page].hash

    # ---- reference counting ----------------------------------------------------------------

    def acquire(self, pages: Iterable[int]) -> None:
        """Take a reference on registered pages (a prefix hit), root first."""
        for p in pages:
            st = self._pages[p]
            if st.key is None:
                raise PageCacheError(f"page {p} is not registered; only registered pages are shared")
            if st.ref == 0:
                self._retained_unreferenced -= 1
                self._leaves.pop(p, None)
            st.ref += 1

    def allocate(self, n: int) -> list[int]:
        """Hand out `n` private, writable pages with one reference each, evicting LRU leaves."""
        if n > self.num_free():
            raise PageCacheError(f"cannot allocate {n} pages, {self.num_free()} free")
        out = []
        for _ in range(n):
            if self._free_private:
                p = self._free_private.pop()
                self._free_private_set.discard(p)
            else:
                p = self._evict_one_leaf()
            st = self._pages[p]
            assert st.ref == 0 and st.key is None and st.children == 0
            st.ref = 1
            out.append(p)
        return out

    def release(self, pages: Iterable[int]) -> None:
        """Drop one reference per page; give pages in eviction-priority order (tail first)."""
        for p in pages:
            st = self._pages[p]
            if st.ref <= 0:
                raise PageCacheError(f"page {p} released more often than referenced")
            st.ref -= 1
            if st.ref:
                continue
            self._clock += 1
            st.tick = self._clock
            if st.key is not None:
                self._retained_unreferenced += 1
                if st.children == 0:
                    self._push_leaf(p)
            else:
                self._staged.pop(p, None)
                self._free_private.append(p)
                self._free_private_set.add(p)

    # ---- registration ------------------------------------------------------------------------

    def check_writable(self, page: int) -> None:
        st = self._pages[page]
        if page in self._reserved or st.key is not None or st.ref != 1:
            raise PageCacheError(
                f"page {page} is not a private page (registered={st.key is not None}, ref={st.ref}); "
                "shared or registered pages are immutable"
            )

    def stage(self, page: int, key: PageKey) -> None:
        """Mark a full private page for registration at the next `publish()`."""
        self.check_writable(page)
        if len(key.tokens) != self.page_size:
            raise PageCacheError(f"page {page}: only full pages become shareable")
        if (key.parent == ROOT) != (key.depth == 0):
            raise PageCacheError(f"page {page}: depth {key.depth} disagrees with parent {key.parent}")
        self._staged[page] = key

    def publish(self) -> list[int]:
        """Register the staged pages (in staging order); return the pages registered.

        A staged page whose parent is not registered, or whose key is already registered on another
        page (two requests computed the same prefix in one step), stays private.
        """
        staged, self._staged = self._staged, {}
        done = []
        for p, key in staged.items():
            st = self._pages[p]
            if st.ref == 0 or st.key is not None:
                continue
            if key.parent != ROOT:
                parent = self._pages[key.parent]
                if parent.key is None or parent.key.depth != key.depth - 1 or parent.key.group != key.group:
                    continue
                prev_hash = parent.hash
            else:
                prev_hash = 0
            h = self.candidate_hash(prev_hash, key.tokens, key.extra)
            if self._index.find(h, key) is not None:
                continue
            st.key, st.hash = key, h
            self._serial += 1
            st.serial = self._serial
            self._index.add(h, p)
            self._num_registered += 1
            if key.parent != ROOT:
                parent = self._pages[key.parent]
                parent.children += 1
                self._leaves.pop(key.parent, None)
            done.append(p)
        return done

    def discard_staged(self) -> None:
        self._staged.clear()

    def reset(self) -> bool:
        """Forget every registration; refused (False) while any page is referenced."""
        if any(st.ref for p, st in enumerate(self._pages) if p not in self._reserved):
            return False
        for p, st in enumerate(self._pages):
            st.key, st.hash, st.children, st.serial = None, 0, 0, 0
        self._index.clear()
        self._num_registered = 0
        self._leaves.clear()
        self._leaf_heap.clear()
        self._staged.clear()
        self._retained_unreferenced = 0
        self._free_private = [p for p in reversed(range(self.num_pages)) if p not in self._reserved]
        self._free_private_set = set(self._free_private)
        return True

    # ---- eviction ----------------------------------------------------------------------------

    def _push_leaf(self, p: int) -> None:
        tick = self._pages[p].tick
        self._leaves[p] = tick
        heapq.heappush(self._leaf_heap, (tick, p))
        if len(self._leaf_heap) > 2 * len(self._leaves) + HEAP_SLACK:
            self._compact_leaf_heap()

    def _compact_leaf_heap(self) -> None:
        """Drop stale entries (a leaf re-referenced or turned parent since it was pushed). Amortised
        O(1) per push: a rebuild of L live entries follows at least L + HEAP_SLACK stale pushes."""
        self._leaf_heap = [(tick, p) for p, tick in self._leaves.items()]
        heapq.heapify(self._leaf_heap)

    def _evict_one_leaf(self) -> int:
        while self._leaf_heap:
            tick, p = heapq.heappop(self._leaf_heap)
            if self._leaves.get(p) == tick:
                del self._leaves[p]
                self._unregister_leaf(p)
                self.stats.evictions += 1
                return p
        raise PageCacheError(
            "no evictable leaf although unreferenced registered pages exist: a holder of a page "
            "does not hold its ancestors"
        )

    def _unregister_leaf(self, p: int) -> None:
        st = self._pages[p]
        key = st.key
        assert key is not None and st.ref == 0 and st.children == 0
        self._index.remove(st.hash, p)
        self._num_registered -= 1
        st.key, st.hash, st.serial = None, 0, 0
        self._retained_unreferenced -= 1
        if key.parent != ROOT:
            parent = self._pages[key.parent]
            parent.children -= 1
            if parent.children == 0 and parent.ref == 0:
                self._push_leaf(key.parent)

    # ---- size of every structure (memory bound checks) -----------------------------------------

    def structure_sizes(self) -> dict[str, int]:
        """Entries held by each structure that can grow; all are bounded by `num_pages` (the heap by
        2 x leaves + HEAP_SLACK)."""
        return {
            "pages": len(self._pages),
            "leaf_heap": len(self._leaf_heap),
            "leaves": len(self._leaves),
            "free_private": len(self._free_private),
            "free_private_set": len(self._free_private_set),
            "index_pages": self._num_registered,
            "index_buckets": self._index.num_buckets(),
            "index_digests": self._index.num_digest_entries(),
            "staged": len(self._staged),
        }

    # ---- self-check ----------------------------------------------------------------------------

    def audit(self) -> None:
        """Recompute every derived structure from scratch and compare; raise PageCacheError."""
        children = [0] * self.num_pages
        for p, st in enumerate(self._pages):
            if st.ref < 0:
                raise PageCacheError(f"page {p}: negative ref")
            k = st.key
            if k is None:
                continue
            if p in self._reserved:
                raise PageCacheError(f"reserved page {p} is registered")
            if not self._index.contains(st.hash, p) or self._index.find(st.hash, k) != p:
                raise PageCacheError(f"page {p}: index disagrees")
            if k.parent != ROOT:
                parent = self._pages[k.parent]
                if parent.key is None or parent.key.depth != k.depth - 1 or parent.key.group != k.group:
                    raise PageCacheError(f"page {p}: parent {k.parent} is not its registered parent")
                if st.ref > 0 and parent.ref == 0:
                    raise PageCacheError(f"page {p} is held but its parent {k.parent} is not")
                prev = parent.hash
                children[k.parent] += 1
            else:
                if k.depth != 0:
                    raise PageCacheError(f"page {p}: root page at depth {k.depth}")
                prev = 0
            if st.hash != self.candidate_hash(prev, k.tokens, k.extra):
                raise PageCacheError(f"page {p}: stored hash is stale")
        for p, st in enumerate(self._pages):
            if children[p] != st.children:
                raise PageCacheError(f"page {p}: child count {st.children} != {children[p]}")
        leaves = {p for p, st in enumerate(self._pages) if st.key is not None and st.ref == 0 and st.children == 0}
        if leaves != set(self._leaves):
            raise PageCacheError(f"leaf set disagrees: {sorted(leaves ^ set(self._leaves))}")
        private = {p for p, st in enumerate(self._pages) if st.key is None and st.ref == 0 and p not in self._reserved}
        if private != self._free_private_set or len(private) != len(self._free_private):
            raise PageCacheError("private free list disagrees")
        retained = sum(1 for st in self._pages if st.key is not None and st.ref == 0)
        if retained != self._retained_unreferenced:
            raise PageCacheError("unreferenced registered count disagrees")
        registered = sum(1 for st in self._pages if st.key is not None)
        if len(self._index) != registered or self._num_registered != registered:
            raise PageCacheError("index holds stale pages")
        if self._index.num_digest_entries() > registered:
            raise PageCacheError("digest index holds stale pages")
        live = set(self._leaves.items())
        if not live <= {(p, t) for t, p in self._leaf_heap}:
            raise PageCacheError("an evictable leaf has no leaf-heap entry")
        if len(self._leaf_heap) > 2 * len(self._leaves) + HEAP_SLACK:
            raise PageCacheError(f"leaf heap holds {len(self._leaf_heap)} entries for {len(self._leaves)} leaves")
        for p in self._staged:
            if self._pages[p].key is not None or self._pages[p].ref == 0:
                raise PageCacheError(f"staged page {p} is registered or unreferenced")
