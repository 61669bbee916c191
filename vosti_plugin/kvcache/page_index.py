"""Index of registered pages whose lookup cost does not grow with candidate-hash collision chains.

A bucket holds the pages with one (candidate hash, group, physical parent, depth): a lookup knows the
parent and depth it wants, so a colliding hash only ever shares a bucket with *siblings* (children of
the same parent page at the same depth). A bucket is a short list scanned with the exact key check
while it holds at most `CHAIN_CAP` pages; past that it is re-indexed by a keyed digest of the whole
page key (BLAKE2b under a per-process random key), so a lookup costs one digest plus the exact check
of the pages with that digest, which is one page unless BLAKE2b collides. Neither the candidate hash
nor the digest ever decides reuse: `find` returns only a page whose stored key equals the wanted key.
"""
from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable

from vosti_plugin.kvcache.page_key import PageKey

CHAIN_CAP = 8
"""Pages a bucket holds before it is indexed by digest (a scan of 8 exact keys costs about one digest)."""

KeyDigest = Callable[[PageKey], bytes]

_SECRET = os.urandom(32)
_HEADER = struct.Struct("<qqqqq")
_PACKERS: dict[int, struct.Struct] = {}


def keyed_digest(key: PageKey) -> bytes:
    """16-byte BLAKE2b of (group, parent, depth, tokens, hash(extra)) under a per-process secret key.

    `hash(extra)` keeps the digest consistent with key equality for any hashable extra; a crafted
    collision there can only put pages that differ in their extra keys alone into one digest slot.
    """
    n = len(key.tokens)
    packer = _PACKERS.get(n)
    if packer is None:
        packer = _PACKERS.setdefault(n, struct.Struct(f"<{n}q"))
    h = hashlib.blake2b(digest_size=16, key=_SECRET)
    h.update(_HEADER.pack(key.group, key.parent, key.depth, n, hash(key.extra)))
    try:
        h.update(packer.pack(*key.tokens))
    except struct.error:  # a token outside int64: still exact, just slower
        h.update(repr(key.tokens).encode())
    return h.digest()


class _Bucket:
    __slots__ = ("pages", "by_digest", "size")

    def __init__(self) -> None:
        self.pages: list[int] = []
        self.by_digest: dict[bytes, list[int]] | None = None
        self.size = 0


def _slot(h: int, key: PageKey) -> tuple[int, int, int, int]:
    return (h, key.group, key.parent, key.depth)


class PageIndex:
    """(candidate hash, group, parent, depth) -> registered pages; `key_of(page)` gives a page's key."""

    def __init__(self, key_of: Callable[[int], PageKey | None], digest: KeyDigest = keyed_digest,
                 chain_cap: int = CHAIN_CAP) -> None:
        self._key_of = key_of
        self._digest = digest
        self._cap = chain_cap
        self._buckets: dict[int, _Bucket] = {}
        self._page_digest: dict[int, bytes] = {}  # only pages in digest-indexed buckets

    def __len__(self) -> int:
        return sum(b.size for b in self._buckets.values())

    def num_buckets(self) -> int:
        return len(self._buckets)

    def num_digest_entries(self) -> int:
        return len(self._page_digest)

    def longest_scan(self) -> int:
        """The most exact-key comparisons one `find` can take now."""
        worst = 0
        for b in self._buckets.values():
            if b.by_digest is None:
                worst = max(worst, len(b.pages))
            else:
                worst = max(worst, max(map(len, b.by_digest.values()), default=0))
        return worst

    def find(self, h: int, key: PageKey) -> int | None:
        b = self._buckets.get(_slot(h, key))
        if b is None:
            return None
        candidates = b.pages if b.by_digest is None else b.by_digest.get(self._digest(key), ())
        for p in candidates:
            if self._key_of(p) == key:
                return p
        return None

    def add(self, h: int, page: int) -> None:
        slot = _slot(h, self._key_of(page))
        b = self._buckets.get(slot)
        if b is None:
            b = self._buckets[slot] = _Bucket()
        b.size += 1
        if b.by_digest is None:
            b.pages.append(page)
            if len(b.pages) > self._cap:
                b.by_digest = {}
                for p in b.pages:
                    self._add_digest(b, p)
                b.pages = []
        else:
            self._add_digest(b, page)

    def _add_digest(self, b: _Bucket, page: int) -> None:
        d = self._digest(self._key_of(page))
        self._page_digest[page] = d
        b.by_digest.setdefault(d, []).append(page)

    def remove(self, h: int, page: int) -> None:
        slot = _slot(h, self._key_of(page))
        b = self._buckets[slot]
        if b.by_digest is None:
            b.pages.remove(page)
        else:
            d = self._page_digest.pop(page)
            same_digest = b.by_digest[d]
            same_digest.remove(page)
            if not same_digest:
                del b.by_digest[d]
        b.size -= 1
        if b.size == 0:
            del self._buckets[slot]

    def contains(self, h: int, page: int) -> bool:
        key = self._key_of(page)
        b = None if key is None else self._buckets.get(_slot(h, key))
        if b is None:
            return False
        if b.by_digest is None:
            return page in b.pages
        d = self._page_digest.get(page)
        return d is not None and page in b.by_digest.get(d, ())

    def clear(self) -> None:
        self._buckets.clear()
        self._page_digest.clear()
