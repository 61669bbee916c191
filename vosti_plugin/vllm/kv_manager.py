"""vLLM KVCacheManager with exact-prefix matching (`VostiKVCacheManager`, built by the stock Scheduler under
VostiScheduler with the stock arguments: vosti_plugin.vllm.patches.REBINDINGS).

Everything the scheduler and the worker see (KVCacheBlocks, block ids, the null block, the
coordinator's per-request block lists) stays vLLM's; what changes is the policy behind it:
- `get_computed_blocks` walks the PageCache with the request's exact page tokens and extra keys,
  takes the shortest hit over KV cache groups and never covers the last token; a request that stays
  waiting resumes its walk next step from the pages it matched (dropped on admission, on free, and
  ignored once its last matched page was evicted), so a long waiting prompt is not re-hashed per step;
- full pages are staged while the step is scheduled and published after it (`publish_step`), so
  this step's lookups never see pages this step writes;
- the block pool evicts only unreferenced leaves;
- sliding-window groups keep every page of a request (no recycling below the window), so each
  holder of a page holds its whole ancestor chain.
Supported groups: full attention and sliding window (one shared page size). Anything else is refused.
"""
from __future__ import annotations

import functools
import json
import os

from vllm.v1.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
from vllm.v1.core.single_type_kv_cache_manager import FullAttentionManager, SlidingWindowManager

from vosti_plugin.vllm import compat, patches
from vosti_plugin.kvcache.audit import KVCacheAuditError, ShadowAudit
from vosti_plugin.kvcache.page_cache import ROOT, PageCache, PageKey, PrefixHitStats, PrefixMatch, rolling_hash
from vosti_plugin.vllm.request_pages import page_extras, page_tokens
from vosti_plugin.vllm.block_pool import VostiBlockPool


MAX_REMEMBERED_MATCHES = 4096
"""Waiting requests whose prefix match is kept between steps (oldest dropped first past this)."""

STATS_FILE_ENV = "VOSTI_KV_STATS_FILE"
"""If set, the manager rewrites this JSON file with its counters after every step and free (soak tests
read it from outside the engine process)."""


class UnsupportedKVCacheLayout(ValueError):
    """The model's KV cache groups are not ones vosti can share exactly (hybrid/mamba, mixed sizes)."""


def _check_supported(manager: KVCacheManager) -> int:
    managers = manager.coordinator.single_type_managers
    for m in managers:
        if type(m) not in (FullAttentionManager, SlidingWindowManager):
            raise UnsupportedKVCacheLayout(
                f"vosti KV cache supports full-attention and sliding-window groups only; group "
                f"{m.kv_cache_group_id} uses {type(m).__name__} ({type(m.kv_cache_spec).__name__})"
            )
        if m.block_pool is not manager.block_pool:
            raise UnsupportedKVCacheLayout("every KV cache group must share one block pool")
    sizes = {m.block_size for m in managers}
    if len(sizes) != 1:
        raise UnsupportedKVCacheLayout(f"all KV cache groups need one block size, got {sorted(sizes)}")
    (page_size,) = sizes
    if manager.block_pool.hash_block_size != page_size:
        raise UnsupportedKVCacheLayout("hash_block_size must equal the block size")
    if getattr(manager, "use_eagle", False):
        raise UnsupportedKVCacheLayout("speculative decoding (EAGLE block dropping) is not supported")
    return page_size


def _keep_whole_chain(manager) -> None:
    """A sliding-window group keeps the pages below its window, so holders keep whole chains."""
    manager.get_num_skipped_tokens = lambda num_computed_tokens: 0
    compat.kv_manager_drop_admission_cap(manager)


class VostiKVCacheManager(KVCacheManager):
    page_cache: PageCache
    shadow: ShadowAudit | None

    def __init__(self, *args, audit: bool = False, candidate_hash=rolling_hash, **kwargs) -> None:
        """KVCacheManager's arguments, as the stock Scheduler passes them; `audit` adds the shadow audit."""
        pool = functools.partial(VostiBlockPool, audit=audit, candidate_hash=candidate_hash)
        with patches.rebound("vllm.v1.core.kv_cache_coordinator", "BlockPool", pool):
            super().__init__(*args, **kwargs)
        if not isinstance(self.block_pool, VostiBlockPool):
            raise RuntimeError(f"vLLM {compat.vllm_version()} built a {type(self.block_pool).__name__}, not "
                               "vosti's block pool (vosti_plugin.vllm.patches.REBINDINGS is out of date)")
        _check_supported(self)
        self.page_cache: PageCache = self.block_pool.cache
        self.shadow: ShadowAudit | None = self.block_pool.shadow
        for m in self.coordinator.single_type_managers:
            if isinstance(m, SlidingWindowManager):
                _keep_whole_chain(m)
        self._check_one_request_fits()
        self.enable_kv_cache_events = False
        self._pending_write_tokens: list[tuple] = []
        self._waiting_matches: dict[str, list[PrefixMatch]] = {}
        self.num_resumed_lookups = 0
        self.frees_by_status: dict[str, int] = {}
        self._stats_file = os.environ.get(STATS_FILE_ENV) or None
        self._last_stats: dict | None = None
        self._write_stats()

    def _check_one_request_fits(self) -> None:
        """vLLM sizes the pool assuming sliding-window groups recycle pages below the window; vosti
        keeps them, so a max_model_len request needs a page per group per page of tokens."""
        if not any(isinstance(m, SlidingWindowManager) for m in self.coordinator.single_type_managers):
            return
        need = self.num_kv_cache_groups * -(-self.max_model_len // self.page_size)
        have = self.block_pool.num_gpu_blocks - 1
        if need > have:
            raise UnsupportedKVCacheLayout(
                f"vosti keeps sliding-window pages below the window: one max_model_len={self.max_model_len} "
                f"request needs {need} pages ({self.num_kv_cache_groups} KV groups), the pool has {have}; "
                "lower max_model_len or give the KV cache more memory"
            )

    @property
    def page_size(self) -> int:
        return self.page_cache.page_size

    @property
    def hit_stats(self) -> PrefixHitStats:
        return self.page_cache.stats

    def get_computed_blocks(self, request) -> tuple[KVCacheBlocks, int, int]:
        if not self.enable_caching or request.skip_reading_prefix_cache:
            return self.empty_kv_cache_blocks, 0, 0
        # The last token is always computed (its logits are the output), never served from cache.
        max_pages = (request.num_tokens - 1) // self.page_size
        tokens = page_tokens(request, self.page_size, max_pages)
        extras = page_extras(request, self.page_size, max_pages)
        previous = self._waiting_matches.pop(request.request_id, None)
        if previous is not None:
            self.num_resumed_lookups += 1
        cache = self.page_cache
        per_group = [
            cache.lookup(g, tokens, extras, max_pages, previous=previous[g] if previous else None)
            for g in range(self.num_kv_cache_groups)
        ]
        self._remember(request.request_id, [cache.remember_match(g, pages) for g, pages in enumerate(per_group)])
        num_pages = min(len(pages) for pages in per_group)  # a hit needs its pages in every group
        if self.shadow is not None:
            for g, pages in enumerate(per_group):
                parent = ROOT
                for depth, p in enumerate(pages[:num_pages]):
                    self.shadow.on_reuse(p, PageKey(g, parent, depth, tokens[depth], extras[depth]))
                    parent = p
        num_hit_tokens = num_pages * self.page_size
        if self.log_stats and not compat.scheduler_records_prefix_stats():
            self.prefix_cache_stats.record(
                num_tokens=request.num_tokens,
                num_hits=num_hit_tokens,
                preempted=request.num_preemptions > 0,
            )
        blocks = tuple([self.block_pool.blocks[p] for p in pages[:num_pages]] for pages in per_group)
        return self.create_kv_cache_blocks(blocks), num_hit_tokens, 0

    def allocate_slots(self, request, num_new_tokens: int, num_new_computed_tokens: int = 0, *args, **kwargs):
        """Stock allocation; an admission (first allocation) counts as one query of the hit stats."""
        admitted = request.num_computed_tokens == 0
        blocks = super().allocate_slots(request, num_new_tokens, num_new_computed_tokens, *args, **kwargs)
        if blocks is not None and admitted:
            self._waiting_matches.pop(request.request_id, None)
            self.page_cache.stats.record(request.num_tokens, num_new_computed_tokens)
        return blocks

    def _remember(self, request_id: str, matches: list[PrefixMatch]) -> None:
        while len(self._waiting_matches) >= MAX_REMEMBERED_MATCHES:
            del self._waiting_matches[next(iter(self._waiting_matches))]
        self._waiting_matches[request_id] = matches

    def num_remembered_matches(self) -> int:
        return len(self._waiting_matches)

    def free(self, request) -> None:
        self._waiting_matches.pop(request.request_id, None)
        super().free(request)
        # vLLM frees a preempted request while it is still RUNNING, a finished one after it finished
        status = getattr(request.status, "name", str(request.status))
        status = "PREEMPTED" if status == "RUNNING" else status
        self.frees_by_status[status] = self.frees_by_status.get(status, 0) + 1
        self._write_stats()

    def pop_blocks_for_free(self, request):
        self._waiting_matches.pop(request.request_id, None)
        return super().pop_blocks_for_free(request)

    def reset_prefix_cache(self) -> bool:
        done = super().reset_prefix_cache()
        if done:
            self._waiting_matches.clear()
        return done

    def get_num_common_prefix_blocks(self, running_request_id: str) -> list[int]:
        """Always 0: cascade attention would make a row's arithmetic depend on its neighbours."""
        return [0] * self.num_kv_cache_groups

    def publish_step(self) -> list[int]:
        """Called once per scheduler step after every lookup and allocation of the step."""
        pages = self.block_pool.publish_staged()
        self._write_stats()
        return pages

    def kv_stats(self) -> dict:
        cache = self.page_cache
        s = cache.stats
        return {
            "num_pages": cache.num_pages,
            "usable_pages": cache.num_pages - len(cache.reserved),
            "free_pages": cache.num_free(),
            "registered_pages": len(cache.registered_pages()),
            "queries": s.queries,
            "hits": s.hits,
            "query_tokens": s.query_tokens,
            "hit_tokens": s.hit_tokens,
            "evictions": s.evictions,
            "resumed_lookups": self.num_resumed_lookups,
            "remembered_matches": len(self._waiting_matches),
            "frees_by_status": dict(self.frees_by_status),
            "structure_sizes": cache.structure_sizes(),
        }

    def _write_stats(self) -> None:
        if self._stats_file is None:
            return
        stats = self.kv_stats()
        if stats == self._last_stats:
            return
        self._last_stats = stats
        tmp = f"{self._stats_file}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(stats, f)
        os.replace(tmp, self._stats_file)

    def discard_staged(self) -> None:
        self.page_cache.discard_staged()

    # ---- audit of the slots a step writes ------------------------------------------------------

    def audit_step_writes(self, num_scheduled_tokens: dict[str, int], requests: dict) -> None:
        """Check every slot this step writes: private page, consistent lineage, one token per slot.

        Runs after the scheduler advanced num_computed_tokens. A slot whose token is not known yet
        (async scheduling) is checked once it is.
        """
        assert self.shadow is not None
        pending, self._pending_write_tokens = self._pending_write_tokens, []
        for entry in pending:
            self._audit_slot(*entry)
        for req_id, n in num_scheduled_tokens.items():
            request = requests[req_id]
            end = request.num_computed_tokens
            start = end - n
            if n <= 0 or start < 0:
                continue
            block_ids = self.get_block_ids(req_id)
            last_page = (end - 1) // self.page_size
            extras = page_extras(request, self.page_size, last_page + 1)
            for g, ids in enumerate(block_ids):
                for pos in range(start, end):
                    d = pos // self.page_size
                    if d >= len(ids):
                        raise KVCacheAuditError(f"request {req_id}: slot {pos} has no page in group {g}")
                    page = ids[d]
                    if self.block_pool.blocks[page].is_null:
                        raise KVCacheAuditError(f"request {req_id}: slot {pos} maps to the null page")
                    if self.page_cache.is_registered(page):
                        raise KVCacheAuditError(
                            f"request {req_id} writes slot {pos} into registered page {page} (group {g})"
                        )
                    parent = ROOT if d == 0 else ids[d - 1]
                    gen = self.shadow.generation(page)
                    self._audit_slot(request, page, g, d, parent, extras[d], pos, gen)

    def _audit_slot(self, request, page, group, depth, parent, extra, pos, gen) -> None:
        if self.shadow.generation(page) != gen:
            return  # the page was freed and handed out again before its token was known
        if pos >= request.num_tokens:
            if not request.is_finished():
                self._pending_write_tokens.append((request, page, group, depth, parent, extra, pos, gen))
            return
        token = request.all_token_ids[pos]
        self.shadow.on_write(page, group, depth, parent, extra, pos % self.page_size, token)
