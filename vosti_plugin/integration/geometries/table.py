"""Launch-check table over real geometries: accepted or refused (with the root causes), and the check's time.

    python -m vosti_plugin.integration.geometries.table [--models a,b] [--platform cuda] [--out DIR] [-- vLLM args...]
    python -m vosti_plugin.integration.geometries.table --launch [--launch-layers 2] [--out DIR] [-- vLLM args...]

Each geometry is written as a config.json and checked as `vllm serve DIR --attention-backend vosti
--load-format dummy` would check it on this machine (the offline check, the same obligations as a real
launch). Each geometry runs in a fresh process: the cold time is its first check there (vLLM's model
inspection, the catalog's proof results read from the cache, any config the cached proofs lack proved
then; with --empty-proof-cache each process proves from nothing what its launch needs), the cached time a
second check of it in the same process. Multimodal checkpoints (Gemma-3 4B/12B)
are checked as shipped and with `--language-model-only` (their served text path).
With --out: README.md (command and table) and summary.json (the rows).

--launch starts a real vLLM engine per geometry and variant instead (`vllm.LLM(..., attention_backend="vosti",
load_format="dummy")` in a fresh process, up to --launch-parallel at once) and generates a few greedy tokens:
accepted = the engine was built and generated. The decoder is capped to --launch-layers layers (each layer
kind kept): every per-layer shape is the checkpoint's, and per-layer shapes are what the launch check covers.
The vLLM args after `--` become LLM keyword arguments (on CPU: `-- --dtype float32`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vosti_plugin.integration.geometries import GEOMETRIES
from vosti_plugin.integration.geometries.launches import (LaunchSettings, causes_cell, launch_all,
                                                         launch_geometry, launch_markdown, launch_summary)

BASE_ARGS = ["--load-format", "dummy", "--skip-tokenizer-init"]
TEXT_PATH = ["--language-model-only"]


def variants(name: str) -> list[list[str]]:
    """The argument sets a geometry is checked with: as shipped, and a multimodal one's text path."""
    return [[], TEXT_PATH] if "text_config" in GEOMETRIES[name] else [[]]


def _one_check(model: Path, vllm_args: list[str], platform: str | None) -> tuple[dict, float]:
    from vosti_plugin.launch.offline import check_model

    t0 = time.perf_counter()
    facts, statuses = check_model(str(model), [*BASE_ARGS, *vllm_args], platform=platform)
    seconds = time.perf_counter() - t0
    causes = [f"[{s.name}] {s.reason} (fix: {s.fix})" for s in statuses if s.cause]
    return {"accepted": not causes, "platform": facts.platform, "dtype": facts.dtype, "head_size": facts.head_size,
            "queries_per_kv": facts.num_q_heads // max(1, facts.num_kv_heads), "architecture": facts.architecture,
            "note": (facts.extra or {}).get("text_tower"), "causes": causes}, seconds


def check_geometry(name: str, root: Path, vllm_args: list[str], platform: str | None = None,
                   repeat: bool = True) -> dict:
    """One row: the first check (cold in a fresh process) and, with repeat, the same check again (cached)."""
    model = root / name
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps(GEOMETRIES[name], indent=1))
    row = {"model": name, "args": " ".join(vllm_args)}
    t0 = time.perf_counter()
    try:
        facts, cold = _one_check(model, vllm_args, platform)
    except Exception as exc:        # vLLM itself refused the config: report it, keep going
        return {**row, "accepted": False, "cold_s": round(time.perf_counter() - t0, 2), "cached_s": None,
                "causes": [f"vLLM: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"]}
    row.update(facts, cold_s=round(cold, 2), cached_s=None)
    if repeat:
        again, cached = _one_check(model, vllm_args, platform)
        assert again["accepted"] == facts["accepted"], (name, again, facts)
        row["cached_s"] = round(cached, 2)
    return row


def _in_fresh_process(name: str, vllm_args: list[str], platform: str | None, proof_cache: Path | None = None) -> dict:
    """proof_cache: the process's own (empty) proof cache, so its first check proves what the launch needs."""
    cmd = [sys.executable, "-m", "vosti_plugin.integration.geometries.table", "--row", name,
           *(["--platform", platform] if platform else []), "--", *vllm_args]
    env = {**os.environ, **({"VOSTI_CACHE_DIR": str(proof_cache)} if proof_cache is not None else {})}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = round(time.perf_counter() - t0, 1)
    rows = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not rows:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"model": name, "args": " ".join(vllm_args), "accepted": False, "cold_s": None, "cached_s": None,
                "process_s": wall, "causes": [f"check process failed (rc {done.returncode}): {tail}"]}
    return {**json.loads(rows[-1]), "process_s": wall}


def markdown(rows: list[dict], command: str, machine: str, notes: list[str] | None = None,
             empty_proof_cache: bool = False) -> str:
    accepted = sum(r["accepted"] for r in rows)
    cold = ("its first check there, from an empty proof cache (so it includes proving what that launch "
            "needs)" if empty_proof_cache else "its first check there (proofs read from the cache)")
    lines = [f"# Launch check over real geometries ({machine})", "", "    " + command, "",
             f"{accepted} of {len(rows)} checks accepted. Each geometry in a fresh process: cold = {cold}, "
             "cached = the same check again; process = the whole process (Python + vLLM import "
             "included). Timings are wall-clock.", "",
             "| model | vLLM args | head dim | q per kv | accepted | cold s | cached s | process s | why not |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['args'] or '-'} | {r.get('head_size', '')} | "
                     f"{r.get('queries_per_kv', '')} | {'yes' if r['accepted'] else 'no'} | {r['cold_s']} | "
                     f"{r['cached_s']} | {r.get('process_s', '')} | {causes_cell(r)} |")
    notes = sorted({r["note"] for r in rows if r.get("note")}) if notes is None else notes
    if notes:
        lines += [""] + [f"Note: {n}." for n in notes]
    return "\n".join(lines) + "\n"


def summary(rows: list[dict], command: str, machine: str, empty_proof_cache: bool = False) -> dict:
    keep = ("model", "args", "accepted", "head_size", "queries_per_kv", "cold_s", "cached_s", "process_s", "causes")
    return {"kind": "check", "command": command, "machine": machine, "empty_proof_cache": empty_proof_cache,
            "accepted": sum(r["accepted"] for r in rows),
            "checks": len(rows), "rows": [{k: r.get(k) for k in keep} for r in rows],
            "notes": sorted({r["note"] for r in rows if r.get("note")})}


def rebuild(out: Path) -> str:
    """README.md from a run's summary.json (the table is a function of the rows)."""
    data = json.loads((out / "summary.json").read_text())
    if data.get("kind") == "launch":
        return launch_markdown(data["rows"], data["command"], data["machine"], data["launch_layers"],
                               data.get("planned"), data.get("launch_kv_gib", 0.0))
    return markdown(data["rows"], data["command"], data["machine"], data["notes"], data.get("empty_proof_cache", False))


def _machine() -> str:
    import platform as host

    import vllm

    from vosti_plugin.integration.engine_presets import has_gpu

    gpu = ""
    if has_gpu():
        import torch

        gpu = f", {torch.cuda.get_device_name(0)}"
    return f"{host.machine()}, {os.cpu_count()} cores{gpu}, vLLM {vllm.__version__}"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(GEOMETRIES))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--platform", default=None, help="cuda: check GPU launches from a CPU-only machine")
    ap.add_argument("--same-process", action="store_true", help="every check in this process (no cold times)")
    ap.add_argument("--empty-proof-cache", action="store_true",
                    help="each fresh process starts from an empty proof cache (cold = proving what it launches)")
    ap.add_argument("--rebuild", type=Path, default=None, help="rewrite DIR/README.md from DIR/summary.json")
    ap.add_argument("--launch", action="store_true", help="start a real vLLM engine per geometry and variant")
    ap.add_argument("--launch-layers", type=int, default=LaunchSettings.layers, help="decoder depth launched")
    ap.add_argument("--launch-max-model-len", type=int, default=LaunchSettings.max_model_len)
    ap.add_argument("--launch-gpu-share", type=float, default=LaunchSettings.gpu_share,
                    help="gpu_memory_utilization of each engine")
    ap.add_argument("--launch-parallel", type=int, default=4, help="engines starting at once")
    ap.add_argument("--launch-timeout", type=float, default=LaunchSettings.timeout_s, help="seconds per launch")
    ap.add_argument("--launch-kv-gib", type=float, default=None,
                    help="fixed KV cache per engine (default: 2 on a GPU, where launches side by side would "
                         "upset vLLM's memory profiling; 0 on CPU: sized by vLLM)")
    ap.add_argument("--row", default=None, help=argparse.SUPPRESS)     # the fresh process's own work
    ap.add_argument("--launch-row", default=None, help=argparse.SUPPRESS)
    ap.add_argument("vllm_args", nargs="*")
    return ap.parse_args(argv)


def _check_rows(a: argparse.Namespace) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="vosti-geometries-") as tmp:
        for name in a.models.split(","):
            for extra in variants(name):
                args = [*extra, *a.vllm_args]
                cache = Path(tempfile.mkdtemp(prefix="proofs-", dir=tmp)) if a.empty_proof_cache else None
                row = (check_geometry(name, Path(tmp), args, a.platform, repeat=False) if a.same_process
                       else _in_fresh_process(name, args, a.platform, cache))
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def _launch_settings(a: argparse.Namespace) -> LaunchSettings:
    kv_gib = a.launch_kv_gib
    if kv_gib is None:
        from vosti_plugin.integration.engine_presets import has_gpu

        kv_gib = 2.0 if has_gpu() else 0.0
    return LaunchSettings(a.launch_layers, a.launch_max_model_len, a.launch_gpu_share, a.launch_timeout, kv_gib)


def _write(out: Path | None, text: str, data: dict) -> None:
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text(text)
    (out / "summary.json").write_text(json.dumps(data, indent=1) + "\n")


def _run_launches(a: argparse.Namespace, command: str) -> list[dict]:
    settings = _launch_settings(a)
    jobs = [(name, [*extra, *a.vllm_args]) for name in a.models.split(",") for extra in variants(name)]
    machine = _machine()

    def report(rows: list[dict], final: bool = False) -> None:
        text = launch_markdown(rows, command, machine, settings.layers, len(jobs), settings.kv_gib)
        _write(a.out, text, launch_summary(rows, command, machine, settings.layers, len(jobs), settings.kv_gib))
        if final:
            print(text)

    rows = launch_all(jobs, settings, a.launch_parallel, on_rows=report)
    report(rows, final=True)
    return rows


def _run_checks(a: argparse.Namespace, command: str) -> list[dict]:
    rows = _check_rows(a)
    machine = _machine()
    text = markdown(rows, command, machine, empty_proof_cache=a.empty_proof_cache)
    print(text)
    _write(a.out, text, summary(rows, command, machine, a.empty_proof_cache))
    return rows


def main(argv: list[str] | None = None) -> int:
    a = _parse(argv)
    if a.rebuild:
        (a.rebuild / "README.md").write_text(rebuild(a.rebuild))
        return 0
    if a.row:
        with tempfile.TemporaryDirectory(prefix="vosti-geometries-") as tmp:
            print(json.dumps(check_geometry(a.row, Path(tmp), a.vllm_args, a.platform)), flush=True)
        return 0
    if a.launch_row:
        with tempfile.TemporaryDirectory(prefix="vosti-launch-") as tmp:
            row = launch_geometry(a.launch_row, Path(tmp), a.vllm_args, _launch_settings(a))
            print(json.dumps(row), flush=True)
        return 0
    command = ("python -m vosti_plugin.integration.geometries.table "
               + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    rows = _run_launches(a, command) if a.launch else _run_checks(a, command)
    served = {r["model"] for r in rows if r["accepted"]}      # a geometry is served if one of its variants is
    return 0 if served == {r["model"] for r in rows} else 1


if __name__ == "__main__":
    raise SystemExit(main())
