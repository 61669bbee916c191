"""Kernel roofline for decode: bytes a kernel must move / its measured time, against the H200's 4.3 TB/s.

    python -m vosti_plugin.integration.bench.roofline --dense RAW/dense.json --attention RAW/attention_sweep.json --out roofline.md

Inputs are the raw JSONs the H200 scripts write (integration/gpu/dense_bench.py, attention_sweep.py; the
published ones are not tracked, e.g. `git show d52c954:integration/results/h200-kernels/dense.json`); nothing
is re-measured here. Decode GEMMs: weight bytes (N x K x 2) over vosti's time, cuBLAS's time alongside.
Decode attention: K+V bytes of the batch over the time of the config the catalog ships now and of the one
it shipped before the sweep (both on the split path the deployment takes).
"""
from __future__ import annotations

import json
from pathlib import Path

import typer

HBM_BYTES_PER_S = 4.3e12
DECODE_ROWS = (1, 4, 16)


def _pct(nbytes: float, seconds: float) -> str:
    return f"{100 * nbytes / seconds / HBM_BYTES_PER_S:.0f} %"


def gemm_rows(dense: dict) -> list[str]:
    lines = ["| GEMM | N x K | M | weights MB | vosti us | cuBLAS us | floor us | vosti % of HBM | cuBLAS % of HBM | split_k |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in dense["sections"]["bench"]:
        if r["M"] not in DECODE_ROWS:
            continue
        weights = r["N"] * r["K"] * 2
        lines.append(f"| {r['gemm']} | {r['N']} x {r['K']} | {r['M']} | {weights / 1e6:.1f} | {r['vosti_us']:.1f} | "
                     f"{r['cublas_us']:.1f} | {r['floor_us']:.1f} | {_pct(weights, r['vosti_us'] * 1e-6)} | "
                     f"{_pct(weights, r['cublas_us'] * 1e-6)} | {r['config']['split_k']} |")
    return lines


def attention_rows(sweep: dict, before: dict[str, str]) -> list[str]:
    by_key = {(m["geometry"], m["case"], m["config"], m["path"]): m for m in sweep["measurements"] if m.get("ms")}
    lines = ["| geometry | case | config now | ms | GB/s | % of HBM | config before | ms | % of HBM |",
             "|---|---|---|---|---|---|---|---|---|"]
    for geometry, shipped in sweep["shipped"].items():
        now = _catalog_label(geometry)
        cases = sorted({m["case"] for m in sweep["measurements"] if m["geometry"] == geometry and m["case"].startswith("decode")},
                       key=lambda c: (int(c.split()[1][1:]), int(c.split()[2][:-1])))
        for case in cases:
            cur = by_key.get((geometry, case, now, "split"))
            old = by_key.get((geometry, case, before.get(geometry, shipped["config"]), "split"))
            if cur is None:
                continue
            old_cells = f"{old['config']} | {old['ms']:.4f} | {old['pct_hbm']:.0f} %" if old else "— | — | —"
            lines.append(f"| {geometry} | {case} | {now} | {cur['ms']:.4f} | {cur['kv_GBps']:.0f} | {cur['pct_hbm']:.0f} % | "
                         f"{old_cells} |")
    return lines


def _catalog_label(geometry: str) -> str:
    """The sweep's label of the config the catalog ships today for the sweep's geometry (page 64, bf16)."""
    import torch

    from vosti_plugin.attention.config import select_config

    heads = {"llama-3.1-8b": (128, 32, 8), "gemma-3-4b": (256, 8, 4)}[geometry]
    c = select_config(*heads, 64, torch.bfloat16)
    return f"m{c.block_m} n{c.block_n} s{c.segment} w{c.num_warps} st{c.num_stages}"


def main(dense: Path = typer.Option(..., help="dense_bench.py JSON"),
         attention: Path = typer.Option(..., help="attention_sweep.py JSON"),
         out: Path = typer.Option(Path("roofline.md"))) -> None:
    sweep = json.loads(attention.read_text())
    before = {g: s["config"] for g, s in sweep["shipped"].items()}   # what the catalog shipped when it ran
    text = "\n".join(["## Decode GEMMs (weights streamed once per step)", "", *gemm_rows(json.loads(dense.read_text())), "",
                      "## Decode attention (K+V of the whole batch, split path)", "", *attention_rows(sweep, before), "",
                      f"Device copy ceiling measured by the sweep: {sweep.get('copy_ceiling_1GiB', {}).get('GBps_read_plus_write', '?')} GB/s "
                      "(read + write). Percentages are of 4.3 TB/s.", ""])
    out.write_text(text)
    typer.echo(text)


if __name__ == "__main__":
    typer.run(main)
