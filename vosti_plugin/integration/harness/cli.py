"""Typer sub-app for the harness (`vosti compare` mounts `app`; also `python -m vosti_plugin.integration.harness.cli`)."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, help="Determinism harness: vosti vs stock vLLM, four variation classes.")
console = Console()


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


@app.command()
def compare(
    scale: str = typer.Option("cpu", help="cpu (tiny model, minutes) or gpu (the paper's sizes)"),
    modes: Optional[str] = typer.Option(None, help="comma list of vosti,default,bi-flash,bi-triton "
                                        "(default: all four; BI is reported unavailable on CPU)"),
    models: Optional[str] = typer.Option(None, help="comma list of tiny,tiny-gemma3,llama31-8b,gemma3-4b,qwen3-8b "
                                         "(default: tiny on CPU; llama31-8b,gemma3-4b,qwen3-8b on GPU)"),
    out: Path = typer.Option(Path("harness-results"), help="output directory"),
    online: bool = typer.Option(False, "--online", help="also run `vllm serve` with 64 concurrent requests"),
    classes: Optional[str] = typer.Option(None, help="comma list of batch,chunk,prefill_decode,prefix (default: all)"),
    worker_timeout: Optional[float] = typer.Option(None, help="seconds per mode (default 900 cpu / 1800 gpu)"),
    gpus: int = typer.Option(1, help="run this many workers at once, one GPU each (CUDA_VISIBLE_DEVICES)"),
    per_gpu: int = typer.Option(1, "--per-gpu", help="share each GPU among this many workers (each with a fixed 5 GiB KV cache)"),
    resume: bool = typer.Option(False, "--resume", help="keep evidence under OUT/raw that already finished"),
    report_only: bool = typer.Option(False, "--report-only", help="run nothing; re-aggregate OUT/raw"),
    eager: bool = typer.Option(False, "--eager", help="enforce_eager=True in every mode (faster startup)"),
) -> None:
    """Run each mode in its own process, compare raw logits bitwise, write results.md/.json/.png."""
    from vosti_plugin.integration.harness.engine import CPU_MODES, GPU_MODES
    from vosti_plugin.integration.harness.run import compare as run_compare

    gpu = scale.startswith("gpu")
    mode_list = _split(modes) if modes else list(GPU_MODES if gpu else CPU_MODES)
    model_list = _split(models) if models else (["llama31-8b", "gemma3-4b", "qwen3-8b"] if gpu else ["tiny"])
    command = "vosti compare " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if "vosti" in Path(sys.argv[0]).name \
        else "python -m vosti_plugin.integration.harness.cli " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    summary = run_compare(scale, mode_list, model_list, out, online,
                          classes=_split(classes) if classes else None, worker_timeout_s=worker_timeout,
                          command=command, console=console, gpus=gpus, per_gpu=per_gpu, resume=resume,
                          report_only=report_only, eager=eager)
    typer.echo((out / "results.md").read_text())
    statuses = ", ".join(f"{r.model}/{r.mode}={r.status}" for r in summary.rows)
    if not summary.ok:
        console.print(f"[red]FAIL[/]: " + "; ".join(summary.failures() or [statuses]))
        raise typer.Exit(1)
    what = "vosti bitwise equal in every comparison" if "vosti" in mode_list else "every mode ran"
    console.print(f"[green]PASS[/]: {what} ({statuses}); results in {out}")


if __name__ == "__main__":
    app()
