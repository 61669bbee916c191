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


@app.command()
def model(path: Optional[Path] = typer.Argument(None, help="where to write it (default: cache dir)")) -> None:
    """Create (if needed) the bundled tiny model and print its path."""
    from vosti_plugin.model.tiny import ensure_tiny_model

    console.print(str(ensure_tiny_model(path)))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
