"""`python -m vosti_plugin.integration.host_numerics_check [--model DIR] [VLLM ARGS]`: the launch's
host-numerics self-test (vosti_plugin.launch.host_numerics) alone, for the bundled tiny model or DIR,
configured as `vllm serve MODEL --attention-backend vosti ARGS` would configure it."""
from __future__ import annotations

import torch

from vosti_plugin.launch.host_numerics import FIX, OBLIGATION, run_self_test


def _has_gpu() -> bool:
    return torch.cuda.is_available()


def main(model: str = "", vllm_args: "list[str] | None" = None) -> int:
    """Run the self-test for `model` (default: the bundled tiny model) as `vllm serve MODEL
    --attention-backend vosti ARGS` would configure it, print every probe, and return 0 if it passed."""
    from rich.console import Console
    from rich.table import Table

    from vosti_plugin.launch.facts import facts_from_vllm_config
    from vosti_plugin.launch.offline import build_vllm_config
    from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

    ensure_interpreter_without_gpu()
    if not model:
        from vosti_plugin.integration.tiny_model import ensure_tiny_model

        model = str(ensure_tiny_model())
    args = list(vllm_args or [])
    if not any(a.startswith("--dtype") for a in args) and not _has_gpu():
        args += ["--dtype", "float32"]          # what a CPU deployment runs (see the `dtype` obligation)
    f = facts_from_vllm_config(build_vllm_config(model, args))
    result = run_self_test(f)
    table = Table(title=f"{OBLIGATION} self-test: {f.model} ({result.device}, {result.dtype})")
    table.add_column("probe")
    table.add_column("bitwise equal at every position")
    for p in result.probes:
        table.add_row(p.name, "yes" if p.ok else "NO: " + "; ".join(p.differing))
    console = Console(width=max(100, Console().width))
    console.print(table)
    console.print(f"{'passed' if result.ok else 'FAILED'}: {len(result.probes)} probes in {result.seconds:.3f} s")
    if not result.ok:
        console.print(f"fix: {FIX.get(result.device, FIX['cuda'])}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    import sys

    import typer

    def _cli(model: str = typer.Option("", help="model directory (default: the bundled tiny model)"),
             vllm_args: list[str] = typer.Argument(None, help="vLLM engine arguments, as for `vllm serve`")):
        raise typer.Exit(main(model, vllm_args))

    typer.run(_cli)
