"""`vosti bench`: throughput of vosti against stock vLLM (default, batch-invariant) on one machine.

Each mode runs `python -m vosti_plugin.integration.bench.throughput` in its own process, one after another, so the modes
never share the device; then `vosti_plugin.integration.bench.report` writes bench.md (tok/s side by side with the HBM
floor, the decode step against vLLM default) and decode_vs_context.png.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

console = Console()

# VLLM_BATCH_INVARIANT=1 crashes on vLLM's CPU platform (see integration/results/README.md).
GPU_ONLY_MODES = {"bi": "vLLM's batch-invariant mode needs a CUDA GPU",
                  "vosti-async": "vLLM's CPU platform turns async scheduling off",
                  "vosti-tall": "the tall GEMM path is for 16-bit GEMMs on a GPU",
                  "vosti-tma": "TMA descriptors need an sm90+ GPU"}


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _run_mode(mode: str, args: list[str], log: Path, timeout_s: float, cells: int) -> int:
    """Run one mode's bench process; show its progress (cells measured) while it runs."""
    with log.open("w") as sink, console.status(f"[bold]{mode}[/]: starting vLLM") as status:
        proc = subprocess.Popen([sys.executable, "-m", "vosti_plugin.integration.bench.throughput", "--mode", mode, *args],
                                stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                return -9
            done = sum(line.startswith("{") for line in log.read_text(errors="replace").splitlines())
            if done:
                status.update(f"[bold]{mode}[/]: {done}/{cells} (batch, context) cells measured")
            time.sleep(1.0)
        return proc.returncode


# A GPU gets the grid of integration/results/h200-s4; a CPU runs Triton's interpreter in fp32, where a real-size
# model takes minutes per token, so it gets the bundled tiny model and a short context (about a minute per mode).
GPU_DEFAULTS = dict(model="llama31-8b", contexts="0,1024,4096,8192,16384", batches="1,4,16", decode_tokens=128,
                    max_model_len=20000)
CPU_DEFAULTS = dict(model="tiny", contexts="0,256", batches="1,4", decode_tokens=16, max_model_len=1024)


def bench(
    model: Optional[str] = typer.Option(None, help="llama31-8b, gemma3-4b, qwen3-8b (dummy weights), tiny, "
                                                   "or a model directory (its own weights); default: llama31-8b "
                                                   "on a GPU, tiny on CPU"),
    modes: Optional[str] = typer.Option(None, help="comma list of vosti,default,bi (also vosti-sync, vosti-async, "
                                        "vosti-tall, vosti-tma); default: vosti,default,bi on a GPU, vosti,default on CPU"),
    contexts: Optional[str] = typer.Option(None, help="cached context lengths (default: 0,1024,4096,8192,16384 on "
                                           "a GPU, 0,256 on CPU)"),
    batches: Optional[str] = typer.Option(None, help="batch sizes (default: 1,4,16 on a GPU, 1,4 on CPU)"),
    decode_tokens: Optional[int] = typer.Option(None, help="tokens decoded per request (default: 128 on a GPU, "
                                                "16 on CPU)"),
    max_model_len: Optional[int] = typer.Option(None, help="default: 20000 on a GPU, 1024 on CPU"),
    dtype: Optional[str] = typer.Option(None, help="default bfloat16 on a GPU, float32 on CPU (vosti on CPU is fp32)"),
    eager: bool = typer.Option(False, "--eager", help="no CUDA graphs / torch.compile"),
    repeats: int = typer.Option(3, min=1, help="measurements of each cell on fresh prompts; tables show the medians"),
    mode_timeout: float = typer.Option(900.0, help="seconds per mode before it is stopped"),
    out: Path = typer.Option(Path("bench-results"), help="output directory"),
) -> None:
    """Decode and prefill tok/s vs cached context, per mode in its own process; tables and a plot in OUT."""
    from vosti_plugin.integration.bench.modes import MODES
    from vosti_plugin.integration.bench.report import main as report_main
    from vosti_plugin.integration.engine_presets import has_gpu

    gpu = has_gpu()
    defaults = GPU_DEFAULTS if gpu else CPU_DEFAULTS
    model = model or defaults["model"]
    contexts = contexts or defaults["contexts"]
    batches = batches or defaults["batches"]
    decode_tokens = decode_tokens or defaults["decode_tokens"]
    max_model_len = max_model_len or defaults["max_model_len"]
    wanted = _split(modes) if modes else (["vosti", "default", "bi"] if gpu else ["vosti", "default"])
    unknown = [m for m in wanted if m not in MODES]
    if unknown:
        console.print(f"[red]unknown mode(s) {', '.join(unknown)}[/]; known: {', '.join(MODES)}")
        raise typer.Exit(2)
    if not gpu:
        for m in [m for m in wanted if m in GPU_ONLY_MODES]:
            console.print(f"[yellow]skipping {m}[/]: {GPU_ONLY_MODES[m]}")
        wanted = [m for m in wanted if m not in GPU_ONLY_MODES]
    if not wanted:
        console.print("[red]no mode left to run[/]")
        raise typer.Exit(2)
    out.mkdir(parents=True, exist_ok=True)
    name = Path(model).name if Path(model).is_dir() else model
    cells = len(_split(batches)) * len(_split(contexts))
    common = ["--model", model, "--contexts", contexts, "--batches", batches, "--decode-tokens", str(decode_tokens),
              "--max-model-len", str(max_model_len), "--dtype", dtype or ("bfloat16" if gpu else "float32"),
              "--repeats", str(repeats)]
    if eager:
        common.append("--eager")
    results, failed = [], []
    for mode in wanted:
        result = out / f"tp_{name}_{mode}.json"
        log = out / f"tp_{name}_{mode}.log"
        result.unlink(missing_ok=True)
        started = time.monotonic()
        rc = _run_mode(mode, [*common, "--out", str(result)], log, mode_timeout, cells)
        if rc == 0 and result.exists():
            console.print(f"[green]{mode}[/]: done in {time.monotonic() - started:.0f} s")
            results.append(result)
        else:
            why = f"stopped after {mode_timeout:.0f} s" if rc == -9 else f"exit status {rc}"
            console.print(f"[red]{mode} failed[/] ({why}); its log: {log}")
            failed.append(mode)
    if results:
        report_main(["--throughput", *map(str, results), "--out", str(out)])
        console.print(f"tables: {out / 'bench.md'}, plot: {out / 'decode_vs_context.png'}")
    if failed:
        raise typer.Exit(1)
