"""Audit mode: an independent shadow record of what each page holds, checked on every write and reuse.

The shadow knows nothing of the page cache's indexes. It records, per physical page, the group,
depth, physical parent, extra keys and the token written in each slot, as the engine writes them.
A write into a registered (shared) page, a write that disagrees with the page's recorded lineage,
a registration whose key differs from what was written, or a reuse whose key differs from what the
page holds raises `KVCacheAuditError`, which stops the engine.
"""
from __future__ import annotations

import os
from collections.abc import Hashable
from dataclasses import dataclass, field

from vosti_plugin.kvcache.page_cache import PageKey


class KVCacheAuditError(RuntimeError):
    """The KV cache broke an exact-prefix rule; serving more tokens could emit wrong logits."""


def audit_requested(additional_config: dict | None = None) -> bool:
    """On through `--additional-config '{"vosti": {"audit": true}}'` or env VOSTI_AUDIT=1."""
    if os.environ.get("VOSTI_AUDIT", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    vosti = (additional_config or {}).get("vosti") or {}
    return bool(vosti.get("audit", False))


@dataclass
class _Shadow:
    group: int | None = None
    depth: int | None = None
    parent: int | None = None
    extra: Hashable = None
    tokens: dict[int, int] = field(default_factory=dict)


class ShadowAudit:
    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self._pages: dict[int, _Shadow] = {}
        self._registered: set[int] = set()
        self._generation: dict[int, int] = {}
        self.num_checks = 0

    def generation(self, page: int) -> int:
        """Bumped each time the page is handed out afresh; a stale record of a write is dropped."""
        return self._generation.get(page, 0)

    def on_allocate(self, pages) -> None:
        for p in pages:
            self._pages[p] = _Shadow()
            self._registered.discard(p)
            self._generation[p] = self._generation.get(p, 0) + 1

    def on_forget(self, pages) -> None:
        """The cache dropped these pages' registrations (eviction or reset)."""
        for p in pages:
            self._registered.discard(p)

    def on_write(
        self, page: int, group: int, depth: int, parent: int, extra: Hashable, offset: int, token: int
    ) -> None:
        self.num_checks += 1
        if page in self._registered:
            raise KVCacheAuditError(f"write into registered page {page} (group {group}, depth {depth}, slot {offset})")
        sh = self._pages.setdefault(page, _Shadow())
        if sh.depth is None:
            sh.group, sh.depth, sh.parent, sh.extra = group, depth, parent, extra
        elif (sh.group, sh.depth, sh.parent, sh.extra) != (group, depth, parent, extra):
            raise KVCacheAuditError(
                f"page {page} holds (group {sh.group}, depth {sh.depth}, parent {sh.parent}) "
                f"but a write for (group {group}, depth {depth}, parent {parent}) targets it"
            )
        old = sh.tokens.get(offset)
        if old is not None and old != token:
            raise KVCacheAuditError(f"page {page} slot {offset}: token {old} overwritten by {token}")
        sh.tokens[offset] = token

    def _check_holds(self, page: int, key: PageKey, what: str) -> None:
        self.num_checks += 1
        sh = self._pages.get(page)
        if sh is None or sh.depth is None:
            raise KVCacheAuditError(f"{what} of page {page}, which was never written")
        written = tuple(sh.tokens.get(i) for i in range(self.page_size))
        held = PageKey(sh.group, sh.parent, sh.depth, written, sh.extra)
        if held != key:
            raise KVCacheAuditError(f"{what} of page {page}: it holds {held}, the cache claims {key}")

    def on_register(self, page: int, key: PageKey) -> None:
        self._check_holds(page, key, "registration")
        self._registered.add(page)

    def on_reuse(self, page: int, key: PageKey) -> None:
        if page not in self._registered:
            raise KVCacheAuditError(f"reuse of page {page}, which is not registered")
        self._check_holds(page, key, "reuse")
