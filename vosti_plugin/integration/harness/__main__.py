"""`python -m vosti_plugin.integration.harness`: the harness without typer (the GPU image may not have it)."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from vosti_plugin.integration.harness.engine import CPU_MODES, GPU_MODES
from vosti_plugin.integration.harness.scale import SCALES


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m vosti_plugin.integration.harness", description=__doc__)
    ap.add_argument("--scale", default="cpu", choices=sorted(SCALES))
    ap.add_argument("--modes", default=None, help="vosti,default,bi-flash,bi-triton")
    ap.add_argument("--models", default=None, help="tiny,tiny-gemma3,llama31-8b,gemma3-4b,qwen3-8b")
    ap.add_argument("--out", type=Path, default=Path("harness-results"))
    ap.add_argument("--online", action="store_true")
    ap.add_argument("--classes", default=None, help="batch,chunk,prefill_decode,prefix")
    ap.add_argument("--worker-timeout", type=float, default=None)
    ap.add_argument("--gpus", type=int, default=1, help="run this many workers at once, one GPU each")
    ap.add_argument("--per-gpu", type=int, default=1,
                    help="share each GPU among this many workers (each with a fixed 5 GiB KV cache)")
    ap.add_argument("--resume", action="store_true", help="keep finished evidence under OUT/raw")
    ap.add_argument("--report-only", action="store_true", help="only re-aggregate OUT/raw")
    ap.add_argument("--eager", action="store_true", help="enforce_eager=True in every mode")
    a = ap.parse_args(argv)
    gpu = a.scale.startswith("gpu")
    split = lambda t: [x.strip() for x in t.split(",") if x.strip()]  # noqa: E731
    modes = split(a.modes) if a.modes else list(GPU_MODES if gpu else CPU_MODES)
    models = split(a.models) if a.models else (["llama31-8b", "gemma3-4b", "qwen3-8b"] if gpu else ["tiny"])
    from vosti_plugin.integration.harness.run import compare

    summary = compare(a.scale, modes, models, a.out, a.online, classes=split(a.classes) if a.classes else None,
                      worker_timeout_s=a.worker_timeout, gpus=a.gpus, per_gpu=a.per_gpu, resume=a.resume,
                      report_only=a.report_only, eager=a.eager,
                      command="python -m vosti_plugin.integration.harness " + shlex.join(argv))
    print((a.out / "results.md").read_text())
    statuses = ", ".join(f"{r.model}/{r.mode}={r.status}" for r in summary.rows)
    print("PASS: " + statuses if summary.ok else "FAIL: " + "; ".join(summary.failures() or [statuses]))
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
