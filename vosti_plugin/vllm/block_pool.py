"""vLLM BlockPool whose policy is the exact-prefix `PageCache`.

vLLM's KVCacheCoordinator builds it with the stock arguments (vosti_plugin.vllm.patches.REBINDINGS), so
BlockPool.__init__ makes the blocks, the null block and whatever else the release keeps; then the
PageCache replaces the hash map, the free queue and LRU eviction: pages are registered by exact key,
staged during a step and published after it, and only unreferenced leaves are evicted.
`block.ref_cnt` and `block.block_hash` are kept as mirrors because vLLM reads them (hashed = registered
= immutable).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from vllm.v1.core.block_pool import BlockPool
from vllm.v1.core.kv_cache_utils import KVCacheBlock

from vosti_plugin.kvcache.audit import ShadowAudit
from vosti_plugin.kvcache.page_cache import ROOT, PageCache, PageKey, rolling_hash
from vosti_plugin.vllm.request_pages import page_extras


def registered_block_marker(page_hash: int, group: int) -> bytes:
    """Stand-in for vLLM's BlockHashWithGroupId (hash bytes + 4-byte group id); only its presence matters."""
    return (page_hash & (2**64 - 1)).to_bytes(8, "big") + group.to_bytes(4, "big")


class VostiBlockPool(BlockPool):
    def __init__(self, *args, audit: bool = False, candidate_hash=rolling_hash, **kwargs) -> None:
        """BlockPool's arguments, as the coordinator passes them; `audit` adds the shadow audit."""
        super().__init__(*args, **kwargs)
        self.enable_kv_cache_events = False
        self.metrics_collector = None
        # PageCache owns the free/evictable bookkeeping; any stock path touching these fails loudly.
        self.free_block_queue = None
        self.cached_block_hash_to_block = None
        self.cache = PageCache(num_pages=self.num_gpu_blocks, page_size=self.hash_block_size,
                               reserved=(self.null_block.block_id,), candidate_hash=candidate_hash)
        self.shadow: ShadowAudit | None = ShadowAudit(self.hash_block_size) if audit else None

    # ---- allocation and reference counting -------------------------------------------------

    def get_num_free_blocks(self) -> int:
        return self.cache.num_free()

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        if num_blocks > self.cache.num_free():
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        pages = self.cache.allocate(num_blocks)
        if self.shadow is not None:
            self.shadow.on_allocate(pages)
        out = []
        for p in pages:
            block = self.blocks[p]
            if block.block_hash is not None:
                block.reset_hash()
            block.ref_cnt = 1
            out.append(block)
        return out

    def touch(self, blocks: Sequence[KVCacheBlock]) -> None:
        pages = [b.block_id for b in blocks if not b.is_null]
        self.cache.acquire(pages)
        for p in pages:
            self.blocks[p].ref_cnt = self.cache.ref(p)

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        pages = [b.block_id for b in ordered_blocks if not b.is_null]
        self.cache.release(pages)
        for p in pages:
            self.blocks[p].ref_cnt = self.cache.ref(p)

    # ---- registration (a page is staged when full, published after the step's lookups) -------

    def cache_full_blocks(
        self,
        request,
        blocks: list[KVCacheBlock],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        kv_cache_group_id: int,
        block_mask: list[bool] | None = None,
    ) -> None:
        del block_mask  # vosti keeps whole chains: every full page of a request is registrable
        if num_cached_blocks >= num_full_blocks:
            return
        extras = page_extras(request, block_size, num_full_blocks)
        tokens = request.all_token_ids
        for i in range(num_cached_blocks, num_full_blocks):
            block = blocks[i]
            parent = ROOT if i == 0 else blocks[i - 1].block_id
            if block.is_null or (i > 0 and blocks[i - 1].is_null):
                break
            if self.cache.is_registered(block.block_id):
                continue
            key = PageKey(
                kv_cache_group_id, parent, i, tuple(tokens[i * block_size : (i + 1) * block_size]), extras[i]
            )
            self.cache.stage(block.block_id, key)

    def publish_staged(self) -> list[int]:
        """Register this step's full pages; they become visible to the next step's lookups."""
        pages = self.cache.publish()
        for p in pages:
            key = self.cache.key(p)
            if self.shadow is not None:
                self.shadow.on_register(p, key)
            self.blocks[p].set_block_hash(
                registered_block_marker(self.cache.page_hash(p), key.group),
                num_tokens=(key.depth + 1) * self.cache.page_size,
            )
        return pages

    def reset_prefix_cache(self) -> bool:
        if not self.cache.reset():
            return False
        for block in self.blocks:
            block.reset_hash()
        if self.shadow is not None:
            self.shadow.on_forget(range(self.num_gpu_blocks))
        return True

    # ---- stock paths vosti does not take ----------------------------------------------------

    def get_cached_block(self, block_hash, kv_cache_group_ids):
        raise NotImplementedError("vosti matches pages by exact key in VostiKVCacheManager.get_computed_blocks")

    def cache_partial_block(self, *args, **kwargs):
        raise NotImplementedError("vosti shares only full pages")

    def emit_cached_block_events(self, *args, **kwargs) -> None:
        return None

    def evict_blocks(self, block_ids: set[int]) -> None:
        raise NotImplementedError("vosti does not support KV connectors (external eviction)")

    def unpin_blocks(self, blocks, on_reuse) -> None:
        raise NotImplementedError("vosti does not support KV connectors (unpinned reads)")

    def move_block_hashes(self, src_block, dst_block) -> None:
        raise NotImplementedError("vosti never moves a registration to another page")

    def take_events(self):
        return []
