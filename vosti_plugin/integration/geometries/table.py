"""Launch-check table over real geometries: accepted or refused (with the root causes), and the check's time.

    python -m vosti_plugin.integration.geometries.table [--models a,b] [--platform cuda] [--out DIR] [-- vLLM args...]

Each geometry is written as a config.json and checked as `vllm serve DIR --attention-backend vosti
--load-format dummy` would check it on this machine (the offline check, the same obligations as a real
launch). Each geometry runs in a fresh process: the cold time is its first check there (vLLM's model
inspection, the catalog's proof results read from the cache, any config the cached proofs lack proved
then; with --empty-proof-cache each process proves from nothing what its launch needs), the cached time a
second check of it in the same process. Multimodal checkpoints (Gemma-3 4B/12B)
are checked as shipped and with `--language-model-only` (their served text path).
With --out: README.md (command and table) and summary.json (the rows).
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


def _why(row: dict) -> str:
    return "; ".join(row["causes"]).replace("|", "\\|")


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
                     f"{r['cached_s']} | {r.get('process_s', '')} | {_why(r)} |")
    notes = sorted({r["note"] for r in rows if r.get("note")}) if notes is None else notes
    if notes:
        lines += [""] + [f"Note: {n}." for n in notes]
    return "\n".join(lines) + "\n"


def summary(rows: list[dict], command: str, machine: str, empty_proof_cache: bool = False) -> dict:
    keep = ("model", "args", "accepted", "head_size", "queries_per_kv", "cold_s", "cached_s", "process_s", "causes")
    return {"command": command, "machine": machine, "empty_proof_cache": empty_proof_cache,
            "accepted": sum(r["accepted"] for r in rows),
            "checks": len(rows), "rows": [{k: r.get(k) for k in keep} for r in rows],
            "notes": sorted({r["note"] for r in rows if r.get("note")})}


def rebuild(out: Path) -> str:
    """README.md from a run's summary.json (the table is a function of the rows)."""
    data = json.loads((out / "summary.json").read_text())
    return markdown(data["rows"], data["command"], data["machine"], data["notes"], data.get("empty_proof_cache", False))


def _machine() -> str:
    import platform as host

    import vllm

    return f"{host.machine()}, {os.cpu_count()} cores, vLLM {vllm.__version__}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(GEOMETRIES))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--platform", default=None, help="cuda: check GPU launches from a CPU-only machine")
    ap.add_argument("--same-process", action="store_true", help="every check in this process (no cold times)")
    ap.add_argument("--empty-proof-cache", action="store_true",
                    help="each fresh process starts from an empty proof cache (cold = proving what it launches)")
    ap.add_argument("--rebuild", type=Path, default=None, help="rewrite DIR/README.md from DIR/summary.json")
    ap.add_argument("--row", default=None, help=argparse.SUPPRESS)     # the fresh process's own work
    ap.add_argument("vllm_args", nargs="*")
    a = ap.parse_args(argv)
    if a.rebuild:
        (a.rebuild / "README.md").write_text(rebuild(a.rebuild))
        return 0
    if a.row:
        with tempfile.TemporaryDirectory(prefix="vosti-geometries-") as tmp:
            print(json.dumps(check_geometry(a.row, Path(tmp), a.vllm_args, a.platform)), flush=True)
        return 0
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
    command = "python -m vosti_plugin.integration.geometries.table " + " ".join(argv if argv is not None
                                                                                 else sys.argv[1:])
    machine = _machine()
    text = markdown(rows, command.strip(), machine, empty_proof_cache=a.empty_proof_cache)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "README.md").write_text(text)
        (a.out / "summary.json").write_text(json.dumps(summary(rows, command.strip(), machine, a.empty_proof_cache), indent=1) + "\n")
    served = {r["model"] for r in rows if r["accepted"]}      # a geometry is served if one of its variants is
    return 0 if served == {r["model"] for r in rows} else 1


if __name__ == "__main__":
    raise SystemExit(main())
