"""`vosti demo`: the same prompts alone and batched give bitwise-equal raw logits under vosti."""
from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from vosti_plugin.integration.evidence import bitwise_equal, first_divergence, max_abs_diff, request_view

DEMO_PROMPTS = (
    "Determinism means the same request gets",
    "The quick brown fox jumps over",
    "A paged attention kernel visits key and value tiles in a fixed order from position zero, and",
    "Audit pipelines replay",
)


@dataclass(frozen=True)
class DemoRow:
    prompt: str
    tokens: int
    equal: bool
    diverges_at: int | None
    max_diff: float


def run_demo(model: str | None = None, max_tokens: int = 8, console: Console | None = None) -> list[DemoRow]:
    from vosti_plugin.integration.engine_presets import build_llm, has_gpu
    from vosti_plugin.integration.tiny_model import ensure_tiny_model

    console = console or Console()
    model = model or str(ensure_tiny_model())
    console.print(f"[bold]vosti demo[/] model={model} device={'GPU' if has_gpu() else 'CPU'}")
    llm = build_llm(model, max_num_batched_tokens=16)   # small budget: longer prompts are prefilled in chunks
    from vosti_plugin.vllm.engine import sampling_params

    params = sampling_params(temperature=0.0, max_tokens=max_tokens, logprobs=20)
    with console.status("each prompt alone"):
        alone = [request_view(llm.generate([p], params, use_tqdm=False)[0]) for p in DEMO_PROMPTS]
    with console.status("all prompts batched, in reverse order"):
        batched_out = llm.generate(list(reversed(DEMO_PROMPTS)), params, use_tqdm=False)
    batched = [request_view(o) for o in reversed(batched_out)]
    rows = [
        DemoRow(p, len(a), bitwise_equal(a, b) and len(a) == len(b), first_divergence(a, b), max_abs_diff(a, b))
        for p, a, b in zip(DEMO_PROMPTS, alone, batched)
    ]
    table = Table(title="raw logits (top-20 per step): alone vs batched + chunked prefill")
    for col in ("prompt", "tokens", "bitwise equal", "first divergence", "max |diff|"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.prompt[:40] + ("…" if len(r.prompt) > 40 else ""),
            str(r.tokens),
            "[green]yes[/]" if r.equal else "[red]NO[/]",
            "-" if r.diverges_at is None else str(r.diverges_at),
            f"{r.max_diff:.3g}",
        )
    console.print(table)
    return rows
