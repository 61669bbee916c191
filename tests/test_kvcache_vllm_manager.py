"""VostiKVCacheManager on real vLLM objects (KVCacheManager, Request), no engine: the step protocol
(lookups before this step's pages register), the last-token rule, refusal of unsupported layouts."""
from __future__ import annotations

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from vllm import SamplingParams  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    MambaSpec,
)
from vllm.v1.request import Request  # noqa: E402

from vosti_plugin.kvcache.audit import KVCacheAuditError  # noqa: E402
from vosti_plugin.vllm.kv_manager import UnsupportedKVCacheLayout, VostiKVCacheManager  # noqa: E402

PAGE = 16


def _manager(spec=None, num_blocks=12, audit=True) -> VostiKVCacheManager:
    spec = spec or FullAttentionSpec(block_size=PAGE, num_kv_heads=2, head_size=32, dtype=torch.float32)
    config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)])
    return VostiKVCacheManager(
        kv_cache_config=config,
        max_model_len=1024,
        scheduler_block_size=PAGE,
        hash_block_size=PAGE,
        enable_caching=True,
        audit=audit,
    )


def _request(rid: str, tokens, salt=None) -> Request:
    return Request(rid, list(tokens), SamplingParams(max_tokens=4), None, cache_salt=salt)


def _admit(mgr: VostiKVCacheManager, req: Request):
    blocks, hit, _ = mgr.get_computed_blocks(req)
    new = mgr.allocate_slots(req, req.num_tokens - hit, hit, blocks)
    assert new is not None
    req.num_computed_tokens = req.num_tokens
    return hit


def _record_writes(mgr: VostiKVCacheManager, req: Request, start: int):
    mgr.audit_step_writes({req.request_id: req.num_tokens - start}, {req.request_id: req})


def test_vllms_own_constructors_build_vosti_pool_and_restore_stock_names():
    import vllm.v1.core.kv_cache_coordinator as coordinator
    from vllm.v1.core.block_pool import BlockPool

    from vosti_plugin.vllm.block_pool import VostiBlockPool

    mgr = _manager()
    assert coordinator.BlockPool is BlockPool, "the coordinator's BlockPool name must be stock again"
    pool = mgr.block_pool
    assert isinstance(pool, VostiBlockPool) and mgr.coordinator.block_pool is pool
    assert all(m.block_pool is pool for m in mgr.coordinator.single_type_managers)
    assert pool.blocks[0] is pool.null_block and pool.cache.num_free() == pool.num_gpu_blocks - 1
    config = mgr.kv_cache_config
    stock = KVCacheManager(kv_cache_config=config, max_model_len=1024, scheduler_block_size=PAGE,
                           hash_block_size=PAGE, enable_caching=True)
    assert type(stock.block_pool) is BlockPool, "a stock manager built afterwards must be stock"


def test_pages_of_this_step_are_invisible_to_this_steps_lookups():
    mgr = _manager()
    prompt = list(range(1, 41))
    a = _request("a", prompt)
    assert _admit(mgr, a) == 0
    _record_writes(mgr, a, 0)
    b = _request("b", prompt)
    assert mgr.get_computed_blocks(b)[1] == 0  # a's full pages are staged, not registered
    mgr.publish_step()
    blocks, hit, _ = mgr.get_computed_blocks(b)
    assert hit == 2 * PAGE
    assert blocks.get_block_ids()[0] == mgr.get_block_ids("a")[0][:2]


def test_last_prompt_token_is_never_served_from_cache():
    mgr = _manager()
    a = _request("a", range(1, 2 * PAGE + 1))
    _admit(mgr, a)
    _record_writes(mgr, a, 0)
    mgr.publish_step()
    same = _request("same", range(1, 2 * PAGE + 1))
    assert mgr.get_computed_blocks(same)[1] == PAGE


def test_salt_is_part_of_page_identity():
    mgr = _manager()
    a = _request("a", range(1, 41))
    _admit(mgr, a)
    _record_writes(mgr, a, 0)
    mgr.publish_step()
    assert mgr.get_computed_blocks(_request("b", range(1, 41), salt="other"))[1] == 0
    assert mgr.get_computed_blocks(_request("e", range(1, 41), salt=""))[1] == 0  # "" is its own tenant
    assert mgr.get_computed_blocks(_request("c", range(1, 41)))[1] == 2 * PAGE


def test_pages_freed_before_publish_never_register():
    mgr = _manager()
    a = _request("a", range(1, 41))
    _admit(mgr, a)
    mgr.free(a)  # e.g. preempted later in the same step, before its KV was written
    mgr.publish_step()
    assert mgr.get_computed_blocks(_request("b", range(1, 41)))[1] == 0
    assert mgr.page_cache.registered_pages() == []


def test_audit_refuses_a_write_into_a_registered_page():
    mgr = _manager()
    a = _request("a", range(1, 41))
    _admit(mgr, a)
    _record_writes(mgr, a, 0)
    mgr.publish_step()
    b = _request("b", range(1, 41))
    _admit(mgr, b)  # hits a's two pages
    with pytest.raises(KVCacheAuditError):
        _record_writes(mgr, b, 0)  # pretend the step recomputes the shared pages in place


def test_usage_and_free_blocks_follow_the_page_cache():
    mgr = _manager(num_blocks=6)  # 5 usable pages
    a = _request("a", range(1, 3 * PAGE + 1))
    _admit(mgr, a)
    _record_writes(mgr, a, 0)
    mgr.publish_step()
    assert mgr.block_pool.get_num_free_blocks() == 2
    mgr.free(a)
    assert mgr.block_pool.get_num_free_blocks() == 5 and mgr.usage == 0.0
    b = _request("b", [7] * (5 * PAGE))  # needs every page: evicts a's leaves first, then parents
    assert _admit(mgr, b) == 0
    assert mgr.page_cache.registered_pages() == [] and mgr.hit_stats.evictions == 3


def test_mamba_layouts_are_refused_with_a_clear_error():
    spec = MambaSpec(block_size=PAGE, shapes=((2, 8),), dtypes=(torch.float32,))
    with pytest.raises(UnsupportedKVCacheLayout, match="MambaManager"):
        _manager(spec=spec)


def test_sliding_window_pool_too_small_for_whole_chains_is_refused():
    from vllm.v1.kv_cache_interface import SlidingWindowSpec

    spec = SlidingWindowSpec(block_size=PAGE, num_kv_heads=2, head_size=32, dtype=torch.float32, sliding_window=32)
    with pytest.raises(UnsupportedKVCacheLayout, match="sliding-window"):
        _manager(spec=spec, num_blocks=12)  # max_model_len 1024 needs 64 pages
    assert _manager(spec=spec, num_blocks=80).page_size == PAGE


def test_a_waiting_request_resumes_its_match_and_sees_evictions():
    """A request that cannot be admitted keeps its matched pages between steps; the next lookup resumes
    from them (only pages past the match are hashed), still equal to a fresh lookup after an eviction."""
    mgr = _manager(num_blocks=6)  # 5 usable pages
    prompt = list(range(1, 3 * PAGE + 2))
    a = _request("a", prompt)
    _admit(mgr, a)
    _record_writes(mgr, a, 0)
    mgr.publish_step()
    mgr.free(a)  # a's 3 full pages stay registered, unreferenced
    waiting = _request("w", prompt)
    assert mgr.get_computed_blocks(waiting)[1] == 3 * PAGE
    assert mgr.num_remembered_matches() == 1 and mgr.num_resumed_lookups == 0
    assert mgr.get_computed_blocks(waiting)[1] == 3 * PAGE
    assert mgr.num_resumed_lookups == 1
    hog = _request("hog", [7] * (3 * PAGE))  # takes 2 free pages, then evicts a's tail page
    _admit(mgr, hog)
    assert mgr.hit_stats.evictions == 1
    blocks, hit, _ = mgr.get_computed_blocks(waiting)
    assert hit == 2 * PAGE and mgr.num_resumed_lookups == 2
    fresh = _request("fresh", prompt)
    assert blocks.get_block_ids() == mgr.get_computed_blocks(fresh)[0].get_block_ids()
    mgr.free(fresh)
    mgr.free(hog)
    _admit(mgr, waiting)
    assert mgr.num_remembered_matches() == 0  # dropped on admission and on free


def test_stats_file_reports_free_pages_after_the_load_drains(tmp_path, monkeypatch):
    import json

    path = tmp_path / "kv.json"
    monkeypatch.setenv("VOSTI_KV_STATS_FILE", str(path))
    mgr = _manager(num_blocks=6)
    a = _request("a", range(1, 3 * PAGE + 1))
    _admit(mgr, a)
    _record_writes(mgr, a, 0)
    mgr.publish_step()
    held = json.loads(path.read_text())
    assert held["free_pages"] == 2 and held["usable_pages"] == 5 and held["registered_pages"] == 3
    mgr.free(a)
    drained = json.loads(path.read_text())
    assert drained["free_pages"] == drained["usable_pages"] == 5
    assert max(drained["structure_sizes"].values()) <= 2 * 6 + 64
