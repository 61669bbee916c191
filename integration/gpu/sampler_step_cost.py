"""The sampler step, vosti vs stock vLLM: microseconds per step at batch 1, 16, 64 (issue #17).

    python3 integration/gpu/sampler_step_cost.py --out DIR                 # H200: vocab 128256, bf16 logits
    python3 integration/gpu/sampler_step_cost.py --out DIR --cpu-smoke     # CPU: vocab 512, fp32, few repeats

One step = vLLM's V1 `Sampler.forward(logits, sampling_metadata)` on a batch whose rows mix the
parameters (cycling): top_k 50 + top_p 0.95 + min_p 0.05 + penalties on one row (so batch 1 has them
all), top_k 50, top_p 0.95, min_p 0.05, presence/frequency/repetition penalties, greedy; temperature 0.9
on the random rows, each seeded by its own generator; 20 logprobs, raw_logits mode; 64 prompt and 32
output tokens per row for the penalties. "stock" is vLLM's sampler as shipped; "vosti" the same class
built while vosti's runtime is installed (vosti_plugin.selection.install_runtime: row-wise top-k/top-p,
vosti softmax, per-request noise, tie-free logprob top-n, the aten overrides min-p's softmax meets).
Wall clock per step with a device synchronize (host work counts: that is what a decode step waits for),
median of --reps after warm-up; `kernel_calls` counts the vosti steps that ran the top-k/top-p Triton
kernel (vosti_plugin/sampling/top_k_top_p.py: on CUDA it is the vosti path; on CPU the torch
reference is). Then the ops alone (`op_cost`): apply_top_k_top_p and the logprob top-20, stock vs
vosti (the kernel on CUDA) vs vosti's torch reference (sort + int64 cumsum, the pre-kernel path), which
is all vosti changes on vLLM 0.26's V2 model runner (its Gumbel draw is already per request). Then
`kernel_checks` on the device: the kernel's masks bitwise equal the torch reference, and each row
launched alone bitwise equals the row in the batch (counts of rows that differ: all must be 0).
Writes DIR/sampler_step_cost.json and prints the tables.
"""
from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
import types
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vosti_plugin.integration.summary_json import dumps  # noqa: E402

BATCHES = (1, 16, 64)
ROW_KINDS = ("all", "top_k", "top_p", "min_p", "penalties", "greedy")
PROMPT_TOKENS, OUTPUT_TOKENS, LOGPROBS = 64, 32, 20

app = typer.Typer(add_completion=False)
console = Console(width=140)


def time_us(fn, device: str, reps: int) -> float:
    """Median wall-clock microseconds of fn() with the device synchronized around each call."""
    import torch

    times = []
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e6)
    return sorted(times)[len(times) // 2]


# ---------------------------------------------------------------- one sampler step


def _min_p_processor(min_p, device: str):
    """vLLM's built-in min-p processor with its per-row state set directly (no input batch here)."""
    from vllm.v1.sample.logits_processor.builtin import MinPLogitsProcessor

    config = types.SimpleNamespace(scheduler_config=types.SimpleNamespace(max_num_seqs=max(BATCHES)))
    proc = MinPLogitsProcessor(config, device, False)
    proc.min_p_count = int((min_p > 0).sum())
    proc.min_p = min_p.to(device).view(-1, 1)
    return proc


def metadata(batch: int, vocab: int, device: str):
    """SamplingMetadata for `batch` rows of ROW_KINDS (cycling); fields this vLLM does not have are skipped."""
    import torch
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    kinds = [ROW_KINDS[i % len(ROW_KINDS)] for i in range(batch)]
    has = lambda i, *names: kinds[i] == "all" or kinds[i] in names  # noqa: E731
    col = lambda values, dtype=torch.float32: torch.tensor(values, dtype=dtype, device=device)  # noqa: E731
    greedy = [k == "greedy" for k in kinds]
    g = torch.Generator().manual_seed(5)
    prompt = torch.randint(0, vocab, (batch, PROMPT_TOKENS), generator=g)
    outputs = torch.randint(0, vocab, (batch, OUTPUT_TOKENS), generator=g).tolist()
    min_p = col([0.05 if has(i, "min_p") else 0.0 for i in range(batch)])
    top_k = [50 if has(i, "top_k") else vocab for i in range(batch)]
    top_p = [0.95 if has(i, "top_p") else 1.0 for i in range(batch)]
    values = dict(
        temperature=col([0.0 if gr else 0.9 for gr in greedy]),
        all_greedy=all(greedy), all_random=not any(greedy),
        top_p=col(top_p) if any(p < 1 for p in top_p) else None,
        top_k=col(top_k, torch.int32) if any(k < vocab for k in top_k) else None,
        generators={i: torch.Generator(device=device).manual_seed(1000 + i) for i in range(batch) if not greedy[i]},
        max_num_logprobs=LOGPROBS,
        no_penalties=not any(has(i, "penalties") for i in range(batch)),
        prompt_token_ids=prompt.to(device),
        frequency_penalties=col([0.5 if has(i, "penalties") else 0.0 for i in range(batch)]),
        presence_penalties=col([0.5 if has(i, "penalties") else 0.0 for i in range(batch)]),
        repetition_penalties=col([1.2 if has(i, "penalties") else 1.0 for i in range(batch)]),
        output_token_ids=outputs, allowed_token_ids_mask=None, bad_words_token_ids={},
    )
    try:
        values["logitsprocs"] = LogitsProcessors([_min_p_processor(min_p, device)])
    except Exception as exc:  # noqa: BLE001 - another vLLM's processor internals: time the rest, say so
        values["logitsprocs"] = LogitsProcessors()
        kinds = [f"{k} (min_p not applied: {type(exc).__name__}: {exc})" if k in ("all", "min_p") else k
                 for k in kinds]
    fields = {f.name: f for f in dataclasses.fields(SamplingMetadata)}
    kw = {name: v for name, v in values.items() if name in fields}
    missing = [n for n, f in fields.items() if n not in kw and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    kw.update({n: None for n in missing})
    return SamplingMetadata(**kw), kinds


def step_cost(vocab: int, device: str, reps: int, warmup: int, dtype) -> dict:
    """{batch: {"stock": us, "vosti": us}} for Sampler.forward."""
    import torch
    from vllm.v1.sample.sampler import Sampler

    from vosti_plugin import selection

    g = torch.Generator(device=device).manual_seed(3)
    logits = {b: (torch.randn(b, vocab, device=device, generator=g) * 2).to(dtype) for b in BATCHES}
    fresh = (lambda x: x.clone()) if dtype == torch.float32 else (lambda x: x)   # forward converts bf16 anyway
    result: dict = {b: {} for b in BATCHES}

    from vosti_plugin.sampling import top_k_top_p

    launch = top_k_top_p.top_k_top_p
    calls = [0]

    def counted(*args, **kwargs):
        calls[0] += 1
        return launch(*args, **kwargs)

    def measure(label: str) -> None:
        sampler = Sampler(logprobs_mode="raw_logits")
        forward_from = getattr(sampler.topk_topp_sampler.forward, "__module__", "")
        if forward_from.startswith("vosti_plugin") != (label == "vosti"):
            raise RuntimeError(f"{label}: the sampler's top-k/top-p forward comes from {forward_from}")
        for b in BATCHES:
            meta, kinds = metadata(b, vocab, device)
            result[b].setdefault("rows", sorted(set(kinds)))
            fn = lambda meta=meta, x=logits[b]: sampler(fresh(x), meta)  # noqa: E731
            for _ in range(warmup):
                fn()
            result[b][label] = time_us(fn, device, reps)
            if label == "vosti":
                calls[0] = 0
                fn()
                result[b]["kernel_calls"] = calls[0]

    measure("stock")
    selection.install_runtime()
    top_k_top_p.top_k_top_p = counted
    try:
        measure("vosti")
    finally:
        top_k_top_p.top_k_top_p = launch
        selection.uninstall_runtime()
    for row in result.values():
        row["vosti/stock"] = row["vosti"] / row["stock"]
    return result


# ---------------------------------------------------------------- the ops vosti replaces


def op_cost(vocab: int, device: str, reps: int) -> dict:
    """us per call: top-k/top-p masking (stock vLLM vs vosti) for all rows top_k 50 / top_p 0.95 / both,
    the logprob top-20 (torch.topk vs vosti's tie-free top-n), and the seeded draw (the same for both)."""
    import torch
    from vllm.v1.sample.ops import topk_topp_sampler as stock

    from vosti_plugin.sampling import rowwise

    stock_apply = stock.apply_top_k_top_p
    if getattr(stock_apply, "__module__", "").startswith("vosti_plugin"):
        raise RuntimeError("op_cost needs vLLM's own apply_top_k_top_p: call it while vosti is not installed")
    g = torch.Generator(device=device).manual_seed(3)
    table = {}
    for batch in BATCHES:
        logits = (torch.randn(batch, vocab, device=device, generator=g) * 2).to(torch.bfloat16).float()
        k = torch.full((batch,), 50, dtype=torch.int32, device=device)
        p = torch.full((batch,), 0.95, device=device)
        gens = {i: torch.Generator(device=device).manual_seed(i) for i in range(batch)}
        row = {}
        for label, kk, pp in (("top_k", k, None), ("top_p", None, p), ("top_k_top_p", k, p)):
            for impl, fn in (("stock", stock_apply), ("vosti", rowwise.apply_top_k_top_p),
                             ("vosti_torch_ref", rowwise.reference_top_k_top_p)):
                fn(logits.clone(), kk, pp)   # warm-up (Triton compile)
                row[f"{label}:{impl}"] = time_us(lambda fn=fn, kk=kk, pp=pp: fn(logits.clone(), kk, pp), device, reps)
        row["clone_only"] = time_us(lambda: logits.clone(), device, reps)
        row["topk20:stock"] = time_us(lambda: torch.topk(logits, 20, dim=-1), device, reps)
        rowwise.tie_free_topk(logits, 20)
        row["topk20:vosti"] = time_us(lambda: rowwise.tie_free_topk(logits, 20), device, reps)
        probs = torch.softmax(logits, dim=-1)
        row["draw(seeded)"] = time_us(lambda: stock.random_sample(probs.clone(), gens), device, reps)
        table[batch] = row
    return table


def kernel_checks(vocab: int, device: str, batch: int = 64) -> dict:
    """Rows (of `batch`, mixed k / p, bf16-rounded logits so there are ties) where the top-k/top-p kernel
    differs bitwise from the torch reference, and where a row launched alone differs from it in the batch."""
    import torch

    from vosti_plugin.sampling import rowwise, top_k_top_p

    g = torch.Generator(device=device).manual_seed(11)
    logits = (torch.randn(batch, vocab, device=device, generator=g) * 2).to(torch.bfloat16).float()
    k = torch.randint(1, 200, (batch,), device=device, generator=g, dtype=torch.int32)
    k[::3] = vocab
    p = torch.rand(batch, device=device, generator=g) * 0.9 + 0.05
    p[1::4] = 1.0
    out = {}
    for label, kk, pp in (("top_k", k, None), ("top_p", None, p), ("top_k_top_p", k, p)):
        got = top_k_top_p.top_k_top_p(logits.clone(), kk, pp)
        want = rowwise.reference_top_k_top_p(logits.clone(), kk, pp)
        differ = (got.view(torch.int32) != want.view(torch.int32)).any(dim=1)
        alone = torch.cat([top_k_top_p.top_k_top_p(logits[r:r + 1].clone(), None if kk is None else kk[r:r + 1],
                                                   None if pp is None else pp[r:r + 1]) for r in range(batch)])
        moved = (alone.view(torch.int32) != got.view(torch.int32)).any(dim=1)
        out[label] = {"rows": batch, "kernel_vs_reference_rows_differ": int(differ.sum()),
                      "alone_vs_batch_rows_differ": int(moved.sum()),
                      "kept_tokens_mean": float(torch.isfinite(got).sum(dim=1).float().mean())}
    return out


# ---------------------------------------------------------------- report


def _tables(steps: dict, ops: dict) -> list[Table]:
    t = Table(title="sampler step (V1 Sampler.forward, mixed rows, 20 logprobs), us per step, median")
    for name in ("batch", "stock", "vosti", "vosti / stock", "kernel calls"):
        t.add_column(name, justify="right")
    for b, row in steps.items():
        t.add_row(str(b), f"{row['stock']:.0f}", f"{row['vosti']:.0f}", f"{row['vosti/stock']:.2f}x",
                  str(row.get("kernel_calls", "")))
    o = Table(title="ops vosti replaces, us per call, median")
    names = list(next(iter(ops.values())))
    o.add_column("batch", justify="right")
    for n in names:
        o.add_column(n.replace(":", "\n"), justify="right")
    for b, row in ops.items():
        o.add_row(str(b), *(f"{row[n]:.0f}" for n in names))
    return [t, o]


@app.command()
def main(out: Path = typer.Option(..., help="results folder"),
         cpu_smoke: bool = typer.Option(False, "--cpu-smoke", help="CPU, vocab 512, fp32, a few repeats"),
         vocab: int = typer.Option(128256, help="vocabulary (Llama-3.1: 128256); smoke: 512"),
         reps: int = typer.Option(0, help="timed repeats per point (GPU 50, smoke 3)"),
         warmup: int = typer.Option(0, help="untimed calls first (GPU 5, smoke 1)")) -> None:
    import os

    if cpu_smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        vocab = 512 if vocab == 128256 else vocab
    from vosti_plugin.integration.engine_presets import prepare_environment

    prepare_environment(in_process=True)
    import torch
    import vllm

    device = "cpu" if cpu_smoke else "cuda"
    reps = reps or (3 if cpu_smoke else 50)
    warmup = warmup or (1 if cpu_smoke else 5)
    summary = {"command": shlex.join([sys.executable, *sys.argv]), "vllm": vllm.__version__, "torch": torch.__version__,
               "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "vocab": vocab,
               "rows": list(ROW_KINDS), "reps": reps, "warmup": warmup}
    summary["kernel_checks"] = kernel_checks(vocab, device, batch=4 if cpu_smoke else 64)
    console.print(summary["kernel_checks"])
    summary["ops_us"] = op_cost(vocab, device, reps)
    summary["step_us"] = step_cost(vocab, device, reps, warmup, torch.float32 if cpu_smoke else torch.bfloat16)
    for t in _tables(summary["step_us"], summary["ops_us"]):
        console.print(t)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sampler_step_cost.json").write_text(dumps(json.loads(json.dumps(summary))) + "\n")


if __name__ == "__main__":
    app()
