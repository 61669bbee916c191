"""Exact-prefix KV block manager.

`page_cache` and `audit` are pure Python (no vLLM import); vosti_plugin.vllm.kv_manager /
vosti_plugin.vllm.block_pool adapt them to vLLM's KVCacheManager / BlockPool.
"""
from vosti_plugin.kvcache.audit import KVCacheAuditError, ShadowAudit, audit_requested
from vosti_plugin.kvcache.page_cache import (
    ROOT,
    PageCache,
    PageCacheError,
    PageKey,
    PrefixHitStats,
    PrefixMatch,
    rolling_hash,
)

__all__ = [
    "ROOT",
    "KVCacheAuditError",
    "PageCache",
    "PageCacheError",
    "PageKey",
    "PrefixHitStats",
    "PrefixMatch",
    "ShadowAudit",
    "audit_requested",
    "rolling_hash",
]
