"""vosti's KV cache through vLLM's OpenAI server (`vllm serve` on 127.0.0.1, CPU, the bundled tiny model,
a 7-page pool, audit mode on through tests/conftest.py):

- tenants with different `cache_salt` never share a page: per-request `cached_tokens`, vLLM's
  `prefix_cache_hits` counter and vosti's own hit counter all stay at 0 across tenants and count the
  hit within a tenant;
- an empty `cache_salt` is refused with HTTP 400 (vLLM's request validation); it never reaches the cache
  (if it did, the manager would treat "" as a tenant of its own, `request_pages.tenant_namespace`);
- a bounded soak (mixed tenants, aborts mid-stream, client disconnects, preemption and eviction under the
  tiny pool): every completed request bitwise equal to its solo run, no page leaked after the drain.
  VOSTI_SOAK_REQUESTS=N runs a longer soak (default 12 requests); the same soak as a CLI:
  `python -m vosti_plugin.integration.bench.kvcache_soak --requests N`.
"""
from __future__ import annotations

import os
import random

import pytest

pytest.importorskip("vllm")

from vosti_plugin.integration.bench.kvcache_soak import PAGE, run_soak, soak_table, vosti_server  # noqa: E402
from vosti_plugin.integration.harness.online import completion_view  # noqa: E402
from vosti_plugin.integration.evidence import bitwise_equal  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]   # a `vllm serve` process for the module: the slow tier's servers

SOAK_REQUESTS = int(os.environ.get("VOSTI_SOAK_REQUESTS", "12"))


@pytest.fixture(scope="module")
def server():
    with vosti_server() as s:
        yield s


def _cached(resp: dict) -> int:
    return (resp["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0


def test_tenants_never_share_pages_through_the_openai_server(server):
    rng = random.Random(2101)
    prompt = [rng.randrange(4, 500) for _ in range(2 * PAGE + 6)]  # 2 full pages are shareable
    hits0, kv0 = server.metric("vllm:prefix_cache_hits"), server.kv_stats()
    first = {salt: server.complete(prompt, salt, max_tokens=2) for salt in ("tenant-a", "tenant-b", None)}
    assert {salt: _cached(r) for salt, r in first.items()} == {"tenant-a": 0, "tenant-b": 0, None: 0}
    assert server.metric("vllm:prefix_cache_hits") == hits0
    assert server.kv_stats()["hit_tokens"] == kv0["hit_tokens"]
    again = server.complete(prompt, "tenant-a", max_tokens=2)
    assert _cached(again) == 2 * PAGE, "the same tenant should hit its own pages (else the test is blind)"
    assert server.metric("vllm:prefix_cache_hits") - hits0 == 2 * PAGE
    assert bitwise_equal(completion_view(again), completion_view(first["tenant-a"]))


def test_empty_cache_salt_is_refused_and_touches_no_page(server):
    before = server.kv_stats()
    body = server.body([5, 6, 7] * 30, "")
    assert server.status_of(body) == 400
    after = server.kv_stats()
    assert (after["queries"], after["registered_pages"]) == (before["queries"], before["registered_pages"])


def test_soak_mixed_tenants_aborts_disconnects_preemption(server):
    result = run_soak(server, SOAK_REQUESTS, workers=6, seed=int(os.environ.get("VOSTI_SOAK_SEED", "0")))
    print()
    from rich.console import Console

    Console(width=120).print(soak_table(result))
    assert not result.errors, result.errors
    assert result.mismatches == []
    assert result.compared == result.completed > 0
    assert result.pages_leaked == 0
    assert result.largest_structure <= result.structure_bound
    assert result.aborted + result.disconnected > 0
    assert result.frees_by_status.get("FINISHED_ABORTED", 0) > 0, "no abort reached the engine"
    assert result.preemptions > 0, "the pool no longer forces preemption"
