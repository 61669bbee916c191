"""The `vosti` command line."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Bitwise-deterministic vLLM: demo, verify, compare.")
console = Console()


@app.command()
def demo(
    model: Optional[str] = typer.Option(None, help="model path (default: the bundled tiny Llama)"),
    max_tokens: int = typer.Option(8, help="tokens to generate per prompt"),
) -> None:
    """Start vLLM with the vosti backend, run prompts alone and batched, show raw logits are bitwise equal."""
    from vosti_plugin.demo import run_demo

    rows = run_demo(model=model, max_tokens=max_tokens, console=console)
    bad = [r for r in rows if not r.equal]
    if bad:
        console.print(f"[red]FAIL[/]: {len(bad)}/{len(rows)} prompts differ between alone and batched")
        raise typer.Exit(1)
    console.print(f"[green]PASS[/]: {len(rows)}/{len(rows)} prompts bitwise equal alone and batched")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def verify(
    ctx: typer.Context,
    kernel: Optional[str] = typer.Option(None, help="only this kernel (default: every shipped kernel)"),
    json_path: Optional[Path] = typer.Option(None, "--json", help="also write the results as JSON"),
    model: Optional[str] = typer.Option(None, help="check this model's launch (extra args go to vLLM)"),
) -> None:
    """Prove every shipped kernel x config x contract; with --model, also run the launch check offline."""
    import json

    from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

    ensure_interpreter_without_gpu()
    failed = False
    if model is None or kernel is not None:
        from rich.progress import Progress

        from verifier.api import results_json, results_table, verify_catalog

        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("proving kernel x config x contract", total=None)
            results = verify_catalog(kernel=kernel, progress=lambda result: progress.advance(task))
        console.print(results_table(results))
        failed |= any(r.status != "proved" for r in results)
        if json_path:
            json_path.write_text(json.dumps(results_json(results), indent=2))
    if model is not None:
        from rich.table import Table

        from vosti_plugin.launch.offline import check_model

        facts, statuses = check_model(model, list(ctx.args))
        table = Table(title=f"launch obligations for {model} ({facts.dtype}, page {facts.page_size})")
        for col in ("obligation", "status", "detail"):
            table.add_column(col)
        for st in statuses:
            table.add_row(st.name, "[green]holds[/]" if st.ok else "[red]FAILED[/]",
                          st.description if st.ok else f"{st.reason} -> fix: {st.fix}")
        console.print(table)
        failed |= not all(st.ok for st in statuses)
    if failed:
        raise typer.Exit(1)


@app.command()
def model(path: Optional[Path] = typer.Argument(None, help="where to write it (default: cache dir)")) -> None:
    """Create (if needed) the bundled tiny model and print its path."""
    from vosti_plugin.model.tiny import ensure_tiny_model

    console.print(str(ensure_tiny_model(path)))


def _mount_compare() -> None:
    from integration.harness.cli import compare

    app.command("compare", help="Determinism harness: vosti vs stock vLLM on the four variation classes.")(compare)


_mount_compare()


def _mount_bench() -> None:
    from integration.bench.cli import bench

    app.command("bench", help="Throughput: vosti vs stock vLLM (default, BI) vs cached context, one process per mode.")(bench)


_mount_bench()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
