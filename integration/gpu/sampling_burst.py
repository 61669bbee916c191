"""Seeded sampling under load, vosti vs stock vLLM, plus the sampler step cost (issue #17).

    python3 integration/gpu/sampling_burst.py --out DIR [--model llama31-8b] [--layers 8] [--tokens 48]
        [--per-case 6] [--modes vosti,default]   (modes run in separate calls join the table in DIR)
    python3 integration/gpu/sampling_burst.py --out DIR --smoke      # CPU, tiny model, a few tokens

Each mode (vosti, then stock vLLM "default" as the control) runs in its own process: one engine
(re-drawn N(0, 1/fan_in) weights on a dummy-loaded geometry, bf16, logprobs_mode raw_logits, prefix
caching on, 2048-token budget so long prompts are prefilled in chunks, vLLM's default async scheduling
and model runner), then
  1. every request alone, one at a time;
  2. burst A: all requests at once (64+ seeded requests of mixed parameters: temperature, top_k,
     top_p, top_k + top_p, min_p, penalties, greedy, greedy + repetition penalty, logit_bias,
     allowed_token_ids, min_tokens + stop ids, logprobs 20, prompt_logprobs, n = 2);
  3. burst B: the same requests in another order;
and compares tokens and logprobs bit for bit (per parameter set: requests equal alone vs A, alone vs B).
Then, in the parent process, the sampler op cost (integration/gpu/sampler_step_cost.py `op_cost`):
vLLM's apply_top_k_top_p and torch.topk against vosti's row-wise ops at batch 1, 16, 64 (us per call,
median of repeats).
Writes DIR/sampling_burst.json (+ one JSON per mode) and prints a table; exit 0 iff vosti is bitwise
equal everywhere.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import struct
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from vosti_plugin.integration.sampling_cases import cases, sampling_params  # noqa: E402

CASES = cases(tokenizer=False)   # the engine has no tokenizer (skip_tokenizer_init)
MODES = ("vosti", "default")


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _lp(entries):
    if entries is None:
        return None
    return [None if s is None else sorted((t, _bits(v.logprob), v.rank) for t, v in s.items()) for s in entries]


def _view(out) -> list:
    return [_lp(out.prompt_logprobs),
            [[list(c.token_ids), _lp(c.logprobs)] for c in sorted(out.outputs, key=lambda c: c.index)]]


def _requests(per_case: int, vocab: int, smoke: bool) -> list[dict]:
    rng = random.Random(17)
    reqs = []
    for name in CASES:
        for j in range(per_case):
            short = name == "prompt_logprobs"
            length = rng.randrange(8, 60) if smoke else rng.randrange(32, 300 if short else 3000)
            reqs.append({"id": f"{name}/{j}", "case": name, "seed": 1000 + len(reqs),
                         "prompt": [rng.randrange(16, vocab) for _ in range(length)]})
    return reqs


def _engine(mode: str, smoke: bool, model: str, layers: int, out: Path):
    from vosti_plugin.integration.harness import models
    from vosti_plugin.integration.engine_presets import llm_kwargs, prepare_environment

    prepare_environment(in_process=True)
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")   # apply_model re-draws weights
    from vllm import LLM

    spec = models.get("tiny" if smoke else model)
    if spec.dummy and layers:
        spec = dataclasses.replace(spec, config={**spec.config, "num_hidden_layers": layers})
    path = models.materialize(spec, out / "models")
    kw = dict(skip_tokenizer_init=True, max_model_len=4096, max_num_batched_tokens=64 if smoke else 2048,
              max_num_seqs=32 if smoke else 128, max_logprobs=20, logprobs_mode="raw_logits")
    if not smoke:
        kw.update(dtype="bfloat16", gpu_memory_utilization=float(os.environ.get("VOSTI_BURST_GPU_MEM", "0.8")))
    if spec.dummy:
        kw["load_format"] = "dummy"
    kw = llm_kwargs(str(path), vosti=mode == "vosti", **kw)
    if not smoke and mode == "vosti":
        kw.pop("block_size", None)
    llm = LLM(**kw)
    facts = {"vocab": spec.vocab_size}
    if spec.dummy:
        from vosti_plugin.integration.harness.weights import redraw

        facts["redraw"] = llm.apply_model(redraw)[0]
    return llm, facts


def _generate(llm, reqs: list[dict], tokens: int) -> dict:
    prompts = [{"prompt_token_ids": r["prompt"]} for r in reqs]
    params = [sampling_params(CASES[r["case"]], seed=r["seed"], max_tokens=tokens, ignore_eos=True) for r in reqs]
    outs = llm.generate(prompts, params, use_tqdm=False)
    return {r["id"]: _view(o) for r, o in zip(reqs, outs)}


def _compare(alone: dict, burst: dict) -> dict:
    per_case: dict[str, list[int]] = {}
    for rid, view in alone.items():
        case = rid.split("/")[0]
        hit = per_case.setdefault(case, [0, 0])
        hit[0] += int(burst.get(rid) == view)
        hit[1] += 1
    return per_case


def run_mode(mode: str, args) -> dict:
    out = Path(args.out)
    res: dict = {"mode": mode, "status": "running"}
    t0 = time.perf_counter()
    try:
        llm, facts = _engine(mode, args.smoke, args.model, args.layers, out)
        import vllm

        res.update(facts, vllm=vllm.__version__, startup_s=time.perf_counter() - t0)
        reqs = _requests(args.per_case, facts["vocab"], args.smoke)
        res["requests"] = len(reqs)
        t = time.perf_counter()
        alone = {}
        for r in reqs:
            alone.update(_generate(llm, [r], args.tokens))
        res["alone_s"] = time.perf_counter() - t
        for label, order_seed in (("burst_a", 1), ("burst_b", 2)):
            order = list(reqs)
            random.Random(order_seed).shuffle(order)
            t = time.perf_counter()
            burst = _generate(llm, order, args.tokens)
            res[f"{label}_s"] = time.perf_counter() - t
            res[label] = _compare(alone, burst)
        res["status"] = "ok"
    except Exception as exc:  # noqa: BLE001 - recorded for the report; the control may crash on CPU
        res.update(status="error", reason=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-4000:])
    res["total_s"] = time.perf_counter() - t0
    (out / f"sampling_burst_{mode}.json").write_text(json.dumps(res, indent=1))
    return res


# ---------------------------------------------------------------- parent


def _summary(results: dict) -> bool:
    print("\n| parameters | " + " | ".join(f"{m} alone=A | {m} alone=B" for m in results) + " |")
    print("|---|" + "---|---|" * len(results))
    ok = True
    for case in CASES:
        cells = []
        for mode, res in results.items():
            for label in ("burst_a", "burst_b"):
                hit = res.get(label, {}).get(case)
                cells.append(f"{hit[0]}/{hit[1]}" if hit else res.get("status", "?"))
                if mode == "vosti" and (not hit or hit[0] != hit[1]):
                    ok = False
        print(f"| {case} | " + " | ".join(cells) + " |")
    for mode, res in results.items():
        if res.get("status") != "ok":
            print(f"{mode}: {res.get('status')} {res.get('reason', '')}")
    cost = results.get("vosti", {}).get("sampler_cost_us")
    if cost:
        names = list(next(iter(cost.values())))
        print("\nsampler step cost, us (median): | batch | " + " | ".join(names) + " |")
        for batch, row in cost.items():
            print(f"| {batch} | " + " | ".join(f"{row[n]:.0f}" for n in names) + " |")
    return ok and results.get("vosti", {}).get("status") == "ok"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="llama31-8b")
    ap.add_argument("--layers", type=int, default=8, help="decoder layers of the geometry (the issue measured 8)")
    ap.add_argument("--tokens", type=int, default=None, help="tokens per request (48; smoke 3)")
    ap.add_argument("--per-case", type=int, default=None, help="requests per parameter set (6 -> 84; smoke 2)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny model: checks the script, not the GPU")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--timeout-s", type=float, default=270, help="per mode (two modes fit a 560 s call)")
    args = ap.parse_args()
    args.tokens = args.tokens or (3 if args.smoke else 48)
    args.per_case = args.per_case or (2 if args.smoke else 6)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if args.child:
        run_mode(args.child, args)
        return 0
    results = {}
    for mode in args.modes.split(","):
        cmd = [sys.executable, __file__, "--child", mode, "--out", args.out, "--model", args.model,
               "--tokens", str(args.tokens), "--per-case", str(args.per_case), "--layers", str(args.layers)] + (["--smoke"] if args.smoke else [])
        print(f"== {mode}: {' '.join(cmd)}", flush=True)
        with open(Path(args.out) / f"sampling_burst_{mode}.log", "w") as log:
            try:
                subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout_s, check=False)
            except subprocess.TimeoutExpired:
                pass
        path = Path(args.out) / f"sampling_burst_{mode}.json"
        results[mode] = json.loads(path.read_text()) if path.exists() else {"status": "no result (see log)"}
        print(f"   {results[mode].get('status')} in {results[mode].get('total_s', 0):.0f} s", flush=True)
    for mode in MODES:   # a mode run by an earlier call into the same --out joins the table
        path = Path(args.out) / f"sampling_burst_{mode}.json"
        if mode not in results and path.exists():
            results[mode] = json.loads(path.read_text())
    vosti = results.get("vosti", {})
    if vosti.get("status") == "ok" and "sampler_cost_us" not in vosti:   # stock vLLM in this process: not installed
        from integration.gpu.sampler_step_cost import op_cost

        vosti["sampler_cost_us"] = op_cost(vosti["vocab"], "cpu" if args.smoke else "cuda", 5 if args.smoke else 50)
    ok = _summary(results)
    (Path(args.out) / "sampling_burst.json").write_text(json.dumps(results, indent=1))
    print(f"\nVOSTI SAMPLING: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
