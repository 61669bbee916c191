"""Online check: `vllm serve` on 127.0.0.1, 64+ concurrent /v1/completions vs the same requests one
by one, top-k raw logits compared bitwise. The server always dies with this function."""
from __future__ import annotations

from vosti_plugin.integration import SOURCE_ROOT
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from vosti_plugin.integration.evidence import StepLogits, bitwise_equal, max_abs_diff


@dataclass
class OnlineResult:
    mode: str
    status: str                    # ok | error | unavailable
    reason: str | None = None
    requests: int = 0
    matches: int = 0
    compared: int = 0
    startup_s: float = 0.0
    concurrent_s: float = 0.0
    sequential_s: float = 0.0
    mismatches: list[dict] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_command(model: str, port: int, mode: str, block_size: int | None, max_model_len: int,
                  budget: int) -> list[str]:
    cmd = [sys.executable, "-m", "vosti_plugin.integration.harness.serve", "serve", model,
           "--host", "127.0.0.1", "--port", str(port),
           "--dtype", "float32" if not _gpu() else "bfloat16",
           "--max-model-len", str(max_model_len),
           "--max-num-batched-tokens", str(budget), "--seed", "0",
           "--logprobs-mode", "raw_logits", "--enable-prefix-caching",
           "--max-num-seqs", "128"]
    if block_size:
        cmd += ["--block-size", str(block_size)]
    if mode == "vosti":
        cmd += ["--attention-backend", "vosti"]
    return cmd


def _gpu() -> bool:
    from vosti_plugin.integration.engine_presets import has_gpu

    return has_gpu()


def _post(url: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def completion_view(resp: dict) -> tuple[StepLogits, ...]:
    lp = resp["choices"][0]["logprobs"]
    steps = []
    for tok, top in zip(lp["tokens"], lp["top_logprobs"]):
        entries = sorted(((int(t.split(":", 1)[1]), float(v)) for t, v in top.items()), key=lambda kv: (-kv[1], kv[0]))
        steps.append(StepLogits(int(tok.split(":", 1)[1]), tuple(entries)))
    return tuple(steps)


def run_online(model: str, mode: str, log_path: Path, *, requests: int = 64, max_tokens: int | None = None,
               logprobs: int = 20, vocab: int = 512, max_len: int | None = None, startup_timeout: float = 900,
               request_timeout: float = 900) -> OnlineResult:
    """max_tokens / max_len default to 4 / 32 on CPU (vosti's kernels run through Triton's
    interpreter there) and 16 / 1000 on a GPU."""
    from vosti_plugin.integration.engine_presets import prepare_environment

    max_tokens = max_tokens or (16 if _gpu() else 4)
    max_len = max_len or (1000 if _gpu() else 32)
    result = OnlineResult(mode=mode, status="error", requests=requests)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    prepare_environment(in_process=False)
    env = dict(os.environ)
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)   # the server runs its engine core in its own process
    root = str(SOURCE_ROOT)
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    block = None if _gpu() else 32   # CPU: stock attention needs multiples of 32; GPU: each mode's default
    cmd = serve_command(model, port, mode, block, 2048, 256)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(5)
    prompts = [[rng.randrange(4, vocab) for _ in range(rng.randrange(5, max_len))] for _ in range(requests)]
    body = lambda p: {"model": model, "prompt": p, "max_tokens": max_tokens, "temperature": 0.0,  # noqa: E731
                      "logprobs": logprobs, "return_tokens_as_token_ids": True, "ignore_eos": True}
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            while not _healthy(base):
                if proc.poll() is not None:
                    result.reason = f"server exited with {proc.returncode} before /health (see {log_path})"
                    return result
                if time.perf_counter() - t0 > startup_timeout:
                    result.reason = f"server not healthy after {startup_timeout:.0f} s (see {log_path})"
                    return result
                time.sleep(2)
            result.startup_s = time.perf_counter() - t0
            url = base + "/v1/completions"
            t = time.perf_counter()
            with ThreadPoolExecutor(max_workers=requests) as pool:
                concurrent = list(pool.map(lambda p: _post(url, body(p), request_timeout), prompts))
            result.concurrent_s = time.perf_counter() - t
            t = time.perf_counter()
            sequential = [_post(url, body(p), request_timeout) for p in prompts]
            result.sequential_s = time.perf_counter() - t
            for i, (c, s) in enumerate(zip(concurrent, sequential)):
                a, b = completion_view(s), completion_view(c)
                result.compared += 1
                if len(a) == len(b) == max_tokens and bitwise_equal(a, b):
                    result.matches += 1
                else:
                    result.mismatches.append({"request": i, "prompt_len": len(prompts[i]),
                                              "max_abs_diff": max_abs_diff(a, b)})
            result.status = "ok"
        except Exception as exc:  # noqa: BLE001 - reported in the summary
            result.reason = f"{type(exc).__name__}: {exc}"
        finally:
            _stop(proc)
    return result


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
