"""One engine mode on one model, in its own process: run the variation classes, write raw evidence.

    python -m vosti_plugin.integration.harness.worker --mode vosti --model tiny --scale cpu --out evidence.json

Progress goes to stdout as lines `@@progress {"class": ..., "done": i, "total": n}`; the JSON file
holds every pair of views (floats as hex) for the parent to compare.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path

PROGRESS_PREFIX = "@@progress "


def _progress(cls: str, done: int, total: int) -> None:
    print(PROGRESS_PREFIX + json.dumps({"class": cls, "done": done, "total": total}), flush=True)


def _write(out: Path, result: dict) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(out)


def run_worker(mode_name: str, model_name: str, scale_name: str, classes: list[str], out: Path,
               eager: bool = False) -> dict:
    from vosti_plugin.integration.harness import engine, models
    from vosti_plugin.integration.harness.classes import CLASSES, Runner
    from vosti_plugin.integration.harness.scale import get as get_scale

    mode, spec, scale = engine.get_mode(mode_name), models.get(model_name), get_scale(scale_name)
    result: dict = {"mode": mode.name, "label": mode.label, "model": spec.name, "scale": scale.name,
                    "classes": classes, "planned": {c: scale.planned[c] for c in classes},
                    "host": platform.node(), "status": "running", "pairs": [], "timings_s": {}}
    reason = engine.unavailable_reason(mode)
    if reason:
        result.update(status="unavailable", reason=reason)
        _write(out, result)
        return result
    engine.prepare(mode)
    t0 = time.perf_counter()
    try:
        path = models.materialize(spec, out.parent / "models")
        llm = engine.build(mode, spec, str(path), scale, eager=eager)
        result["startup_s"] = time.perf_counter() - t0
        import vllm

        result["vllm_version"] = vllm.__version__
        result["engine"] = engine.engine_facts(llm)
        from vosti_plugin.integration.harness.weights import context_sensitivity, redraw

        if spec.dummy:
            result["sanity_before_redraw"] = context_sensitivity(llm, spec.vocab_size, scale.top_k)
            result["redraw"] = llm.apply_model(redraw)[0]

        result["sanity"] = context_sensitivity(llm, spec.vocab_size, scale.top_k)
        runner = Runner(llm, scale, spec.vocab_size)
        for cls in classes:
            t = time.perf_counter()
            result["pairs"].extend(CLASSES[cls](runner, _progress))
            result["timings_s"][cls] = time.perf_counter() - t
            _write(out, result)           # partial evidence survives a later crash or timeout
        result["status"] = "ok"
    except Exception as exc:  # noqa: BLE001 - the parent reports it; the evidence so far is kept
        result.update(status="error", reason=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    result["total_s"] = time.perf_counter() - t0
    _write(out, result)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vosti_plugin.integration.harness.worker")
    ap.add_argument("--mode", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--scale", required=True)
    ap.add_argument("--classes", default="batch,chunk,prefill_decode,prefix")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--eager", action="store_true", help="enforce_eager=True (no torch.compile / CUDA graphs)")
    a = ap.parse_args(argv)
    result = run_worker(a.mode, a.model, a.scale, [c for c in a.classes.split(",") if c], a.out, a.eager)
    if result["status"] == "error":
        print(result.get("traceback", result.get("reason")), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
