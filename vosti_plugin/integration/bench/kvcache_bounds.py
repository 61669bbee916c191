"""Bounds of the exact-prefix page cache (issue #21): structure size vs requests on a hot prefix,
lookup time vs collision-chain length, and the per-step cost of a long waiting prompt's prefix match.

  python -m vosti_plugin.integration.bench.kvcache_bounds [--baseline REV] [--requests 1000000] [--chains 250,1000,2000]
                                             [--waiting-tokens 100000] [--json PATH]

Operates on `PageCache` directly (pure Python, no engine). `--baseline REV` also runs the same workloads
on `vosti_plugin/kvcache/page_cache.py` as committed at REV (loaded from git) and prints before/after.
"""
from __future__ import annotations

from vosti_plugin.integration import SOURCE_ROOT
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

ROOT_DIR = SOURCE_ROOT
PAGE = 16
HOT_PREFIX_PAGES = 2
CHECKPOINTS = (1_000, 10_000, 100_000, 1_000_000)

app = typer.Typer(add_completion=False)


def load_page_cache(rev: str | None) -> ModuleType:
    """The working tree's page_cache module, or the one committed at `rev` (its own module copy)."""
    if rev is None:
        from vosti_plugin.kvcache import page_cache

        return page_cache
    src = subprocess.run(["git", "show", f"{rev}:vosti_plugin/kvcache/page_cache.py"], cwd=ROOT_DIR,
                         check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="page_cache_")) / "page_cache_baseline.py"
    path.write_text(src)
    name = f"page_cache_at_{rev.replace('~', '_').replace('^', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---- hashes -----------------------------------------------------------------------------------


def normal_hash(prev, tokens, extra):
    return hash((prev, tokens, extra))


def two_bit_hash(prev, tokens, extra):
    return hash((prev, tokens, extra)) & 3


def constant_hash(prev, tokens, extra):
    return 0


HASHES = {"normal": normal_hash, "2-bit": two_bit_hash, "constant": constant_hash}


# ---- workloads --------------------------------------------------------------------------------


def _register_chain(m: ModuleType, cache, pages_tokens, extra=None) -> list[int]:
    pages = cache.allocate(len(pages_tokens))
    parent = m.ROOT
    for depth, (p, toks) in enumerate(zip(pages, pages_tokens)):
        cache.stage(p, m.PageKey(0, parent, depth, tuple(toks), extra))
        parent = p
    cache.publish()
    return pages


def _heap_bytes(heap: list) -> int:
    return sys.getsizeof(heap) + sum(sys.getsizeof(entry) + sys.getsizeof(entry[0]) for entry in heap)


def hot_prefix_sizes(m: ModuleType, max_requests: int) -> list[dict]:
    """Requests = a hot 2-page prefix + a short private tail: lookup, acquire, allocate, release."""
    cache = m.PageCache(num_pages=64, page_size=PAGE)
    rng = random.Random(0)
    hot_tokens = [tuple(rng.randrange(3, 500) for _ in range(PAGE)) for _ in range(HOT_PREFIX_PAGES)]
    hot = _register_chain(m, cache, hot_tokens)
    cache.release(reversed(hot))
    query = hot_tokens + [tuple(rng.randrange(3, 500) for _ in range(PAGE))]
    rows, done, t0 = [], 0, time.perf_counter()
    for checkpoint in [c for c in CHECKPOINTS if c <= max_requests] or [max_requests]:
        while done < checkpoint:
            hit = cache.lookup(0, query, None, HOT_PREFIX_PAGES)
            cache.acquire(hit)
            tail = cache.allocate(1)
            cache.release(tail + hit[::-1])
            done += 1
        heap = cache._leaf_heap
        rows.append({"requests": done, "leaf_heap_entries": len(heap), "leaf_heap_bytes": _heap_bytes(heap),
                     "evictions": cache.stats.evictions, "us_per_request": 1e6 * (time.perf_counter() - t0) / done})
    cache.audit()
    return rows


def chain_lookup_ms(m: ModuleType, chain: int, hash_name: str, repeats: int = 3) -> float:
    """Median ms of one lookup of a whole registered chain of `chain` pages."""
    cache = m.PageCache(num_pages=chain + 2, page_size=PAGE, candidate_hash=HASHES[hash_name])
    rng = random.Random(chain)
    tokens = [tuple(rng.randrange(3, 500) for _ in range(PAGE)) for _ in range(chain)]
    pages = _register_chain(m, cache, tokens)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        found = cache.lookup(0, tokens)
        times.append(1e3 * (time.perf_counter() - t))
        assert found == pages
    return statistics.median(times)


def sibling_lookup_ms(m: ModuleType, siblings: int, hash_name: str, probes: int = 50) -> float:
    """`siblings` pages registered under one shared first page (one prompt prefix, many continuations):
    median ms of a lookup of one 2-page prompt, over `probes` different continuations."""
    cache = m.PageCache(num_pages=siblings + 2, page_size=PAGE, candidate_hash=HASHES[hash_name])
    rng = random.Random(siblings)
    first = tuple(rng.randrange(3, 500) for _ in range(PAGE))
    (root,) = _register_chain(m, cache, [first])
    tails = [tuple(rng.randrange(3, 500) for _ in range(PAGE)) for _ in range(siblings)]
    pages = cache.allocate(siblings)
    for p, toks in zip(pages, tails):
        cache.stage(p, m.PageKey(0, root, 1, toks))
    cache.publish()
    times = []
    for i in rng.sample(range(siblings), min(probes, siblings)):
        t = time.perf_counter()
        found = cache.lookup(0, [first, tails[i]])
        times.append(1e3 * (time.perf_counter() - t))
        assert found == [root, pages[i]]
    return statistics.median(times)


def waiting_prompt_ms(m: ModuleType, prompt_tokens: int, page: int = 64, steps: int = 5) -> dict:
    """A registered prompt of `prompt_tokens`: ms per step to re-match it fresh, and resumed."""
    n = (prompt_tokens - 1) // page
    cache = m.PageCache(num_pages=n + 2, page_size=page)
    rng = random.Random(7)
    tokens = [tuple(rng.randrange(3, 500) for _ in range(page)) for _ in range(n)]
    _register_chain(m, cache, tokens)
    fresh = []
    for _ in range(steps):
        t = time.perf_counter()
        assert len(cache.lookup(0, tokens)) == n
        fresh.append(1e3 * (time.perf_counter() - t))
    out = {"pages": n, "fresh_ms": statistics.median(fresh), "resumed_ms": None}
    if hasattr(cache, "match_prefix"):
        match = cache.match_prefix(0, tokens)
        resumed = []
        for _ in range(steps):
            t = time.perf_counter()
            match = cache.match_prefix(0, tokens, previous=match)
            resumed.append(1e3 * (time.perf_counter() - t))
            assert len(match.pages) == n
        out["resumed_ms"] = statistics.median(resumed)
    return out


def waiting_request_manager_ms(prompt_tokens: int, audit: bool, page: int = 64, steps: int = 5) -> dict:
    """The same through VostiKVCacheManager.get_computed_blocks on a real vLLM Request (no engine):
    first call (what every step cost before #21) vs later calls of the still-waiting request."""
    import torch
    from vllm import SamplingParams
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.request import Request

    from vosti_plugin.vllm.kv_manager import VostiKVCacheManager

    n_blocks = prompt_tokens // page + 4
    spec = FullAttentionSpec(block_size=page, num_kv_heads=1, head_size=32, dtype=torch.float32)
    config = KVCacheConfig(num_blocks=n_blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)])
    mgr = VostiKVCacheManager(kv_cache_config=config, max_model_len=prompt_tokens + page, scheduler_block_size=page,
                              hash_block_size=page, enable_caching=True, audit=audit)
    rng = random.Random(11)
    prompt = [rng.randrange(3, 500) for _ in range(prompt_tokens)]
    first = Request("first", prompt, SamplingParams(max_tokens=1), None)
    mgr.allocate_slots(first, prompt_tokens)
    if audit:
        first.num_computed_tokens = prompt_tokens
        mgr.audit_step_writes({"first": prompt_tokens}, {"first": first})
    mgr.publish_step()
    waiting = Request("waiting", prompt, SamplingParams(max_tokens=1), None)
    times = []
    for _ in range(steps + 1):
        t = time.perf_counter()
        _, hit, _ = mgr.get_computed_blocks(waiting)
        times.append(1e3 * (time.perf_counter() - t))
        assert hit == (prompt_tokens - 1) // page * page
    return {"audit": audit, "first_ms": times[0], "later_ms": statistics.median(times[1:]),
            "resumed": mgr.num_resumed_lookups}


# ---- tables -----------------------------------------------------------------------------------


def _fmt(x, digits=2) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


@app.command()
def main(
    baseline: Optional[str] = typer.Option(None, help="git revision whose page_cache.py is the 'before'"),
    requests: int = typer.Option(1_000_000, help="hot-prefix requests (checkpoints 1e3..1e6 up to this)"),
    chains: str = typer.Option("250,1000,2000", help="collision-chain lengths in pages"),
    waiting_tokens: int = typer.Option(100_000, help="prompt length of the waiting-request measurement"),
    manager: bool = typer.Option(True, help="also time VostiKVCacheManager.get_computed_blocks (imports vLLM)"),
    json_path: Optional[Path] = typer.Option(None, "--json", help="write all numbers here"),
) -> None:
    console = Console(width=200)
    impls = {"after": load_page_cache(None)}
    if baseline:
        impls = {"before": load_page_cache(baseline), **impls}
    results: dict = {"baseline": baseline, "sizes": {}, "chains": {}, "waiting": {}}

    for label, m in impls.items():
        results["sizes"][label] = hot_prefix_sizes(m, requests)
    table = Table(title=f"Hot prefix ({HOT_PREFIX_PAGES} pages) + private tail, pool 64 pages: leaf-heap size vs requests")
    for col in ("requests", *(f"{lbl} entries" for lbl in impls), *(f"{lbl} MB" for lbl in impls),
                *(f"{lbl} us/req" for lbl in impls), "evictions"):
        table.add_column(col, justify="right")
    for i, row in enumerate(results["sizes"]["after"]):
        per = [results["sizes"][lbl][i] for lbl in impls]
        table.add_row(f"{row['requests']:,}", *(f"{r['leaf_heap_entries']:,}" for r in per),
                      *(f"{r['leaf_heap_bytes'] / 1e6:.3f}" for r in per),
                      *(_fmt(r["us_per_request"]) for r in per), str(row["evictions"]))
    console.print(table)

    lengths = [int(x) for x in chains.split(",") if x]
    for shape, measure, title in (
        ("chain", chain_lookup_ms, f"One registered prompt of N pages (page {PAGE}): ms per whole-prompt lookup"),
        ("siblings", sibling_lookup_ms, f"N sibling pages under one first page: ms per 2-page lookup (median of 50)"),
    ):
        table = Table(title=title)
        table.add_column("N pages", justify="right")
        for lbl in impls:
            for h in HASHES:
                table.add_column(f"{lbl} {h}", justify="right")
        table.add_column("after constant / after normal", justify="right")
        if baseline:
            table.add_column("after constant / before normal", justify="right")
        results["chains"][shape] = {}
        for n in lengths:
            row = {lbl: {h: measure(m, n, h) for h in HASHES} for lbl, m in impls.items()}
            results["chains"][shape][n] = row
            cells = [_fmt(row[lbl][h], 3) for lbl in impls for h in HASHES]
            cells.append(f"{row['after']['constant'] / row['after']['normal']:.2f}x")
            if baseline:
                cells.append(f"{row['after']['constant'] / row['before']['normal']:.2f}x")
            table.add_row(f"{n:,}", *cells)
        console.print(table)

    table = Table(title=f"A waiting {waiting_tokens:,}-token prompt (page 64, fully cached): ms per scheduler step")
    for col in ("what", "pages", "before (fresh match each step)", "after: first step", "after: later steps"):
        table.add_column(col, justify="right")
    for label, m in impls.items():
        results["waiting"][label] = waiting_prompt_ms(m, waiting_tokens)
    w_after = results["waiting"]["after"]
    w_before = results["waiting"].get("before", {}).get("fresh_ms")
    table.add_row("PageCache.match_prefix", str(w_after["pages"]), _fmt(w_before), _fmt(w_after["fresh_ms"]),
                  _fmt(w_after["resumed_ms"], 3))
    if manager:
        for audit in (False, True):
            r = waiting_request_manager_ms(waiting_tokens, audit)
            results["waiting"][f"manager_audit_{audit}"] = r
            table.add_row(f"get_computed_blocks{' + audit' if audit else ''}", str(w_after["pages"]),
                          _fmt(r["first_ms"]), _fmt(r["first_ms"]), _fmt(r["later_ms"], 3))
    console.print(table)
    if json_path:
        json_path.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    app()
