"""Real launches over the geometries: a vLLM engine per geometry in a fresh process, accepted = built and
generated (the `--launch` mode of `vosti_plugin.integration.geometries.table`, which runs them)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from vosti_plugin.integration.geometries import GEOMETRIES
from vosti_plugin.launch.check import CERTIFICATE_ENV


def causes_cell(row: dict) -> str:
    """A row's causes as one markdown table cell."""
    return "; ".join(row["causes"]).replace("|", "\\|")


LAUNCH_PROMPT = list(range(100, 116))     # token ids below every geometry's vocabulary
LAUNCH_TOKENS = 4


@dataclass(frozen=True)
class LaunchSettings:
    layers: int = 2
    max_model_len: int = 2048
    gpu_share: float = 0.2
    timeout_s: float = 300.0
    kv_gib: float = 0.0     # a fixed KV cache; 0: vLLM sizes it by profiling memory

    def cli(self) -> list[str]:
        return ["--launch-layers", str(self.layers), "--launch-max-model-len", str(self.max_model_len),
                "--launch-gpu-share", str(self.gpu_share), "--launch-kv-gib", str(self.kv_gib)]


def _kept_layer_types(layer_types: list[str], layers: int) -> list[str]:
    """The first `layers` kinds, the last ones after the first swapped for any kind the cut would lose
    (Gemma-3's global layer)."""
    kept = layer_types[:layers]
    missing = [k for k in dict.fromkeys(layer_types) if k not in kept][:max(0, layers - 1)]
    return kept[:layers - len(missing)] + missing


def capped(config: dict, layers: int) -> dict:
    """The config with its decoder (a multimodal one's text_config) at most `layers` deep."""
    if "text_config" in config:
        return {**config, "text_config": capped(config["text_config"], layers)}
    out = {**config, "num_hidden_layers": min(layers, config["num_hidden_layers"])}
    if "layer_types" in config:
        out["layer_types"] = _kept_layer_types(config["layer_types"], out["num_hidden_layers"])
    return out


def launch_kwargs(model: Path, vllm_args: list[str], settings: LaunchSettings) -> dict:
    from vosti_plugin.vllm.launch_facts import cli_engine_kwargs

    kv = {"kv_cache_memory_bytes": int(settings.kv_gib * 2**30)} if settings.kv_gib else {}
    return {"model": str(model), "attention_backend": "vosti", "load_format": "dummy", "skip_tokenizer_init": True,
            "max_model_len": settings.max_model_len, "gpu_memory_utilization": settings.gpu_share, **kv,
            **cli_engine_kwargs(vllm_args)}


def _message_lines(exc: BaseException, keep: int = 4) -> list[str]:
    lines = [line.strip()[:300] for line in str(exc).splitlines() if line.strip()][:keep]
    return [f"{type(exc).__name__}: {lines[0] if lines else ''}", *lines[1:]]


def _vosti_refusal(exc: BaseException):
    """The LaunchRefused behind exc, if vosti's launch check is what stopped the engine."""
    from vosti_plugin.launch.obligations import LaunchRefused

    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, LaunchRefused):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def launch_failure_causes(exc: BaseException) -> list[str]:
    """vosti's refusal as its message lines; anything else as `launch failed: ...`."""
    refusal = _vosti_refusal(exc)
    if refusal is not None:
        return _message_lines(refusal)
    return ["launch failed: " + "; ".join(_message_lines(exc, keep=2))]


def launch_geometry(name: str, root: Path, vllm_args: list[str], settings: LaunchSettings) -> dict:
    """One row from a real engine in this process: built (launch_s), then LAUNCH_TOKENS greedy tokens (generate_s)."""
    from vosti_plugin.integration.engine_presets import prepare_environment

    prepare_environment(in_process=True)      # before vLLM's import; on CPU a 1 GiB KV cache
    from vllm import LLM, SamplingParams

    model = root / name
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps(capped(GEOMETRIES[name], settings.layers), indent=1))
    row = {"model": name, "args": " ".join(vllm_args), "layers": settings.layers, "launch_s": None,
           "check_s": None, "generate_s": None, "tokens": 0}
    certificate = model / "certificate.json"
    os.environ[CERTIFICATE_ENV] = str(certificate)    # the launch check's own time is in its certificate
    t0 = time.perf_counter()
    try:
        llm = LLM(**launch_kwargs(model, vllm_args, settings))
    except Exception as exc:
        return {**row, "accepted": False, "launch_s": round(time.perf_counter() - t0, 2),
                "causes": launch_failure_causes(exc)}
    row["launch_s"] = round(time.perf_counter() - t0, 2)
    if certificate.exists():
        row["check_s"] = json.loads(certificate.read_text()).get("check_seconds")
    params = SamplingParams(temperature=0.0, max_tokens=LAUNCH_TOKENS, ignore_eos=True, detokenize=False)
    t0 = time.perf_counter()
    try:
        out = llm.generate([{"prompt_token_ids": LAUNCH_PROMPT}], params, use_tqdm=False)
    except Exception as exc:
        return {**row, "accepted": False, "causes": ["generate failed: " + "; ".join(_message_lines(exc, keep=2))]}
    tokens = len(out[0].outputs[0].token_ids)
    return {**row, "generate_s": round(time.perf_counter() - t0, 2), "tokens": tokens,
            "accepted": tokens == LAUNCH_TOKENS,
            "causes": [] if tokens == LAUNCH_TOKENS else [f"generated {tokens} of {LAUNCH_TOKENS} tokens"]}


def _launch_in_fresh_process(name: str, vllm_args: list[str], settings: LaunchSettings) -> dict:
    cmd = [sys.executable, "-m", "vosti_plugin.integration.geometries.table", "--launch-row", name,
           *settings.cli(), "--", *vllm_args]
    failed = {"model": name, "args": " ".join(vllm_args), "layers": settings.layers, "accepted": False,
              "launch_s": None, "generate_s": None, "tokens": 0}
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=settings.timeout_s)
    except subprocess.TimeoutExpired:
        return {**failed, "process_s": round(time.perf_counter() - t0, 1),
                "causes": [f"launch failed: no row within {settings.timeout_s:g} s (timeout)"]}
    wall = round(time.perf_counter() - t0, 1)
    rows = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not rows:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {**failed, "process_s": wall, "causes": [f"launch failed: process rc {done.returncode}: {tail}"]}
    return {**json.loads(rows[-1]), "process_s": wall}


def launch_all(jobs: list[tuple[str, list[str]]], settings: LaunchSettings, parallel: int,
               on_rows=lambda rows: None) -> list[dict]:
    """Every (geometry, args) launched in its own process, `parallel` at a time; rows in job order.
    on_rows gets the rows done so far (job order) after each one, so a run stopped midway leaves them."""
    done: dict[int, dict] = {}
    lock = threading.Lock()

    def one(index: int) -> dict:
        row = _launch_in_fresh_process(*jobs[index], settings)
        with lock:
            print(json.dumps(row), flush=True)
            done[index] = row
            on_rows([done[i] for i in sorted(done)])
        return row

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return list(pool.map(one, range(len(jobs))))


def launch_markdown(rows: list[dict], command: str, machine: str, layers: int, planned: int | None = None,
                    kv_gib: float = 0.0) -> str:
    accepted = sum(r["accepted"] for r in rows)
    missing = (planned or len(rows)) - len(rows)
    unfinished = f" ({missing} more planned, not finished: the run stopped first)" if missing else ""
    kv = (f" KV cache fixed at {kv_gib:g} GiB per engine (no memory profiling against the launches beside it)."
          if kv_gib else "")
    lines = [f"# Real launches over real geometries ({machine})", "", "    " + command, "",
             f"{accepted} of {len(rows)} launches accepted{unfinished} (engine built with "
             f"attention_backend=\"vosti\" and "
             f"{LAUNCH_TOKENS} greedy tokens generated). Each launch is a real vLLM engine in a fresh process "
             f"(dummy weights), its decoder capped to {layers} layer{'s' if layers != 1 else ''}: every "
             "per-layer shape is the checkpoint's, and per-layer shapes are what the launch check covers. "
             "launch s = the LLM constructor, check s = vosti's launch check inside it (from the launch's "
             f"certificate), generate s = the generate call; wall-clock.{kv}", "",
             "| model | vLLM args | accepted | launch s | check s | generate s | why not |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['args'] or '-'} | {'yes' if r['accepted'] else 'no'} | "
                     f"{_cell(r.get('launch_s'))} | {_cell(r.get('check_s'))} | {_cell(r.get('generate_s'))} | "
                     f"{causes_cell(r)} |")
    return "\n".join(lines) + "\n"


def _cell(seconds: float | None) -> str:
    return "-" if seconds is None else str(seconds)


def launch_summary(rows: list[dict], command: str, machine: str, layers: int, planned: int | None = None,
                   kv_gib: float = 0.0) -> dict:
    keep = ("model", "args", "accepted", "launch_s", "check_s", "generate_s", "tokens", "process_s", "causes")
    return {"kind": "launch", "command": command, "machine": machine, "launch_layers": layers,
            "launch_kv_gib": kv_gib, "accepted": sum(r["accepted"] for r in rows), "launches": len(rows),
            "planned": len(rows) if planned is None else planned, "rows": [{k: r.get(k) for k in keep} for r in rows]}
