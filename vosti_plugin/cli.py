"""The `vosti` command line."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from typer.core import TyperCommand

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Bitwise-deterministic vLLM: demo, verify, compare.")
console = Console()


@app.command()
def demo(
    model: Optional[str] = typer.Option(None, help="model path (default: the bundled tiny Llama)"),
    max_tokens: int = typer.Option(8, help="tokens to generate per prompt"),
) -> None:
    """Start vLLM with the vosti backend, run prompts alone and batched, show raw logits are bitwise equal."""
    from vosti_plugin.integration.demo import run_demo

    rows = run_demo(model=model, max_tokens=max_tokens, console=console)
    bad = [r for r in rows if not r.equal]
    if bad:
        console.print(f"[red]FAIL[/]: {len(bad)}/{len(rows)} prompts differ between alone and batched")
        raise typer.Exit(1)
    console.print(f"[green]PASS[/]: {len(rows)}/{len(rows)} prompts bitwise equal alone and batched")


class _VerifyCommand(TyperCommand):
    """Lists the kernel names in --help; computed only when help is asked for (it imports the kernels)."""

    def format_help(self, ctx, formatter):
        try:
            from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

            ensure_interpreter_without_gpu()
            from vosti_plugin.verify_view import known_kernels_text

            self.epilog = "Kernels (--kernel takes a name, a family or a part of a name): " + known_kernels_text()
        except Exception as exc:  # help must print even where the kernels do not import
            self.epilog = f"(kernel names unavailable: {type(exc).__name__}: {exc})"
        return super().format_help(ctx, formatter)


def _output_console() -> Console:
    """A terminal gets rich's own width; a pipe or file gets whole lines (rich would cut them at 80)."""
    return Console() if sys.stdout.isatty() else Console(width=100_000, soft_wrap=True)


def _usage_error(message: str) -> None:
    from rich.markup import escape

    err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=100_000, soft_wrap=True)
    err.print("[red]error:[/] " + escape(message), highlight=False)
    raise typer.Exit(2)


def _check_writable(path: Path) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        _usage_error(f"--json {path}: is a directory")
    if not parent.is_dir():
        _usage_error(f"--json {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        _usage_error(f"--json {path}: not writable")


@app.command(cls=_VerifyCommand, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def verify(
    ctx: typer.Context,
    kernel: Optional[str] = typer.Option(None, help="only kernels whose name contains this, or this family "
                                         "(default: every shipped kernel; names below)"),
    all_rows: bool = typer.Option(False, "--all", help="one row per kernel x config x contract "
                                  "(default: one row per kernel family, plus every row not proved)"),
    json_path: Optional[Path] = typer.Option(None, "--json", help="also write the results as JSON"),
    model: Optional[str] = typer.Option(None, help="check this model's launch (extra args go to vLLM)"),
    platform: Optional[str] = typer.Option(None, help="with --model: check the launch as on this platform "
                                           "(cuda: a GPU deployment, checked from a CPU-only machine)"),
) -> None:
    """Prove every shipped kernel x config x contract; with --model, also run the launch check offline.
    The last line is always a one-line summary."""
    from vosti_plugin.verify_view import (family_of, known_kernels_text, launch_summary, matches_a_kernel,
                                          print_launch_check, print_results, results_summary)

    out = _output_console()
    if json_path is not None:
        _check_writable(json_path)
    from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

    ensure_interpreter_without_gpu()
    t0 = time.perf_counter()
    failed = False
    summary = []
    if model is None or kernel is not None:
        from vosti_plugin.verifier.api import results_json, verify_catalog

        if kernel is not None and not matches_a_kernel(kernel):
            _usage_error(f"unknown kernel {kernel!r}; known kernels: {known_kernels_text()}")
        from rich.progress import Progress

        with Progress(console=out, transient=True, disable=not out.is_terminal) as progress:
            task = progress.add_task("proving kernel x config x contract", total=None)
            results = verify_catalog(kernel=kernel, progress=lambda result: progress.advance(task))
        print_results(out, results, family_of(), every_row=all_rows)
        failed |= any(r.status != "proved" for r in results)
        summary.append(results_summary(results))
        if json_path is not None:
            try:
                json_path.write_text(json.dumps(results_json(results), indent=2))
            except OSError as exc:
                _usage_error(f"--json {json_path}: {exc.strerror or exc}")
    if model is not None:
        from vosti_plugin.launch.offline import check_model

        if platform not in (None, "cpu", "cuda"):
            _usage_error(f"--platform {platform!r}: known platforms are cpu and cuda")
        facts, statuses = check_model(model, list(ctx.args), platform=platform)
        print_launch_check(out, model, facts, statuses)
        failed |= not all(st.ok for st in statuses)
        summary.append(launch_summary(statuses))
    out.print(f"summary: {'; '.join(summary)}; {'FAILED' if failed else 'ok'} in "
              f"{time.perf_counter() - t0:.1f} s", highlight=False)
    if failed:
        raise typer.Exit(1)


@app.command()
def model(path: Optional[Path] = typer.Argument(None, help="where to write it (default: cache dir)")) -> None:
    """Create (if needed) the bundled tiny model and print its path."""
    from vosti_plugin.integration.tiny_model import ensure_tiny_model

    console.print(str(ensure_tiny_model(path)))


@app.command()
def patches() -> None:
    """Print every attribute of vLLM that vosti replaces (owner, attribute, why, undo, private state)."""
    from vosti_plugin.vllm.patches import print_inventory

    print_inventory(Console(width=200))


def _mount_compare() -> None:
    from vosti_plugin.integration.harness.cli import compare

    app.command("compare", help="Determinism harness: vosti vs stock vLLM on the four variation classes.")(compare)


_mount_compare()


def _mount_bench() -> None:
    from vosti_plugin.integration.bench.cli import bench

    app.command("bench", help="Throughput: vosti vs stock vLLM (default, BI) vs cached context, one process per mode.")(bench)


_mount_bench()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
