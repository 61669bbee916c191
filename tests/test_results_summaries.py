"""integration/results keeps tables + one summary.json per run: the summaries rebuild the published tables,
raw output is git-ignored, kept READMEs point at files that exist."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from vosti_plugin.integration.bench import grid
from vosti_plugin.integration.bench import report as bench_report
from vosti_plugin.integration.harness import report as harness_report
from vosti_plugin.integration.harness.merge import markdown, merge_runs
from vosti_plugin.integration import summarize_run as summarize

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "integration" / "results"
SUMMARY_LIMIT = 20_000
TRACKED_LIMIT = 384 * 1024   # every published run's tables and summaries: a GPU session adds 20-70 KB


def _tracked(*paths: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in out.splitlines()]


def test_only_tables_and_small_summaries_are_tracked():
    tracked = _tracked("integration/results")
    assert tracked
    for path in tracked:
        assert path.suffix == ".md" or path.name in ("summary.json", ".gitignore", "summarize.py"), path
        if path.name == "summary.json":
            assert path.stat().st_size < SUMMARY_LIMIT, path
    assert sum(p.stat().st_size for p in tracked) < TRACKED_LIMIT


@pytest.mark.parametrize("path, ignored", [
    ("integration/results/new-run/raw/tiny-vosti.json", True),
    ("integration/results/new-run/logs/x.log", True),
    ("integration/results/new-run/results.json", True),
    ("integration/results/new-run/tp_llama31-8b_vosti.json", True),
    ("integration/results/new-run/match_rate.png", True),
    ("integration/results/new-run/summary.json", False),
    ("integration/results/new-run/results.md", False),
])
def test_raw_output_is_ignored_and_summaries_are_not(path, ignored):
    rc = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT).returncode
    assert (rc == 0) == ignored, path


def test_paths_named_in_kept_readmes_exist():
    pattern = re.compile(r"`((?:\.\./|integration/results/)[^`\s]*|[\w.-]+/[\w./-]*(?:\.md|summary\.json))`")
    docs = [p for p in _tracked("integration/results", "README.md", "integration/gpu/README.md") if p.suffix == ".md"]
    missing = [(doc.relative_to(ROOT), m.group(1)) for doc in docs for m in pattern.finditer(doc.read_text())
               if not any(base.joinpath(m.group(1)).exists() for base in (doc.parent, ROOT))]
    assert not missing


def test_harness_table_rebuilds_from_the_tracked_summaries():
    runs = ["gemma", "llama", "qwen", "s3-llama", "s3-qwen", "s3-gemma"]
    cells, labels = merge_runs([RESULTS / "h200-harness" / r for r in runs])
    assert markdown(cells, labels) == (RESULTS / "h200-harness" / "TABLE.md").read_text()


@pytest.mark.parametrize("run, kind", [("h200-s17/bench-capture/gemma3-4b", "throughput"),
                                       ("h200-s17/bench-capture/llama31-8b", "throughput"),
                                       ("h200-s4/agentic", "agentic")])
def test_bench_tables_rebuild_from_the_tracked_summaries(tmp_path, run, kind):
    bench_report.main([f"--{kind}", str(RESULTS / run / "summary.json"), "--out", str(tmp_path), "--no-plot"])
    assert (tmp_path / "bench.md").read_text() == (RESULTS / run / "bench.md").read_text()
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads((RESULTS / run / "summary.json").read_text())


def test_grid_tables_rebuild_from_the_tracked_summary(tmp_path):
    run = RESULTS / "h200"
    assert grid.main(["--summary", str(run / "summary.json"), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "grid.md").read_text() == (run / "grid.md").read_text()


def test_readme_grid_table_is_generated_from_the_tracked_summary(capsys):
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("<!-- grid:begin -->\n") + len("<!-- grid:begin -->\n"):readme.index("<!-- grid:end -->")]
    assert grid.main(["--summary", str(RESULTS / "h200" / "summary.json"), "--readme"]) == 0
    assert capsys.readouterr().out == block


def test_readme_table_spans_each_ratio_over_the_contexts_and_names_agentic_and_startup():
    def cell(context, dv, dd, pv, pd):
        return {"model": "m", "batch": 4, "context": context, "decode_tok_s": {"vosti": dv, "default": dd, "bi": dv / 4},
                "prefill_tok_s": {"vosti": pv, "default": pd, "bi": None}}
    summary = {"cells": [cell(0, 90, 100, 5, 1), cell(1024, 80, 100, 70, 100), cell(8192, 60, 100, 50, 100)],
               "agentic": [{"model": "m", "mean_session_s": {"vosti": 40.0, "default": None, "bi": 100.0}}],
               "startup_s": [{"model": "m", "mode": "vosti", "caches": "cold", "startup_s": 60.0},
                             {"model": "m", "mode": "default", "caches": "cold", "startup_s": 50.0}]}
    text = grid.readme_table(summary)
    assert "| m | 4 | 0.60-0.90x | 4.00x | 0.50-0.70x | - |" in text   # context 0's prefill is left out
    assert "40.0 s per session against BI's 100.0 s (2.50x BI)." in text
    assert "vosti 60 s, default 50 s (1.20x)" in text


def _comparison(cls, case, match):
    return {"cls": cls, "case": case, "run": True, "match": match, "first_divergence": None if match else 1,
            "max_abs_diff": 0.0 if match else 0.5, "steps": 4, "meta": {"chunks": [3, 1]}, "not_run_reason": None}


def test_harness_summary_keeps_tallies_and_first_mismatches_and_merges_like_results(tmp_path):
    comparisons = [_comparison("batch", f"case {i}", i % 2 == 0) for i in range(20)]
    row = {"model": "tiny", "mode": "default", "label": "vLLM default", "status": "ok", "reason": None,
           "tallies": {"batch": {"matches": 10, "compared": 20, "not_run": 0}}, "comparisons": comparisons}
    data = {"command": "c", "scale": "cpu", "device": "CPU", "vllm_version": "0.32.0", "top_k": 20,
            "rows": [row], "online": [{"mode": "vosti", "matches": 3, "compared": 3, "mismatches": [1, 2]}]}
    compact = harness_report.compact(data)
    kept = compact["rows"][0]
    assert "comparisons" not in kept and kept["tallies"] == row["tallies"]
    assert [m["case"] for m in kept["mismatches"]] == [f"case {i}" for i in range(1, 13, 2)]
    assert "mismatches" not in compact["online"][0]

    raw, small = tmp_path / "full" / "run", tmp_path / "compact" / "run"
    raw.mkdir(parents=True), small.mkdir(parents=True)
    (raw / "results.json").write_text(json.dumps(data))
    summarize.main([str(raw)])
    (small / "summary.json").write_text((raw / "summary.json").read_text())
    assert json.loads((raw / "summary.json").read_text()) == compact
    assert markdown(*merge_runs([raw])) == markdown(*merge_runs([small]))


def test_sweep_summary_keeps_shipped_adopted_and_fastest_configs(tmp_path):
    configs = [f"m{m} n64 s512 w4 st2" for m in (16, 32, 64, 128)]
    measurements = [{"geometry": "g", "case": "decode b1 1K", "config": c, "path": "split", "ms": ms, "pct_hbm": 1.0}
                    for c, ms in zip(configs, (0.4, 0.3, 0.2, 0.1))]
    sweep = {"env": {}, "plan": {"geometries": [{"name": "g"}]}, "shipped": {"g": {"config": configs[0]}},
             "checks": {"g": []}, "measurements": measurements}
    (tmp_path / "attention_sweep.json").write_text(json.dumps(sweep))
    summarize.main([str(tmp_path), "--keep-config", configs[1]])
    kept = json.loads((tmp_path / "summary.json").read_text())["measurements"]["g"]["decode b1 1K"]
    assert sorted(row[0] for row in kept) == sorted(configs)          # shipped, kept, two fastest
    summarize.main([str(tmp_path)])
    kept = json.loads((tmp_path / "summary.json").read_text())["measurements"]["g"]["decode b1 1K"]
    assert sorted(row[0] for row in kept) == sorted([configs[0], configs[2], configs[3]])


def test_gemm_sweep_summary_keeps_shipped_mid_and_fastest_same_split_configs(tmp_path):
    def config(m, n, k, split, stages=4, split_block_k=0):
        return {"block_m": m, "block_n": n, "block_k": k, "split_k": split, "num_warps": 4, "num_stages": stages,
                "split_block_k": split_block_k}

    def row(cfg, us64, us256, shipped=False):
        return {"config": cfg, "shipped": shipped, "bits_equal_tall": True, "us": {"64": us64, "256": us256}}

    rows = [row(config(16, 32, 128, 2), 30.0, 90.0, shipped=True), row(config(64, 32, 128, 2), 20.0, 50.0),
            row(config(64, 64, 128, 2), 18.0, 55.0), row(config(64, 64, 64, 2), 5.0, 5.0),   # other split lengths
            row(config(64, 64, 128, 4), 1.0, 1.0)]                                             # another split count
    sweep = {"m": [64, 256], "device": "H200",
             "shapes": [{"N": 4096, "K": 4160, "floor_us": 7.0, "cublas_us": {"64": 12.0, "256": 17.0}, "rows": rows}]}
    (tmp_path / "decode_gemm_sweep.json").write_text(json.dumps(sweep))
    summarize.main([str(tmp_path)])
    out = json.loads((tmp_path / "summary.json").read_text())
    assert out["kind"] == "decode_gemm_sweep" and out["configs_timed"] == 5
    shape = out["shapes"][0]
    assert shape["shipped"] == ["m16 n32 k128 s2 st4", {"64": 30.0, "256": 90.0}]
    assert shape["mid"] == ["m64 n32 k128 s2 st4", {"64": 20.0, "256": 50.0}]
    assert shape["same_splits"] == {"64": ["m64 n64 k128 s2 st4", 18.0], "256": ["m64 n32 k128 s2 st4", 50.0]}


def test_gemm_paths_summary_keeps_each_paths_time_and_names_unequal_rows(tmp_path):
    from vosti_plugin.integration import summarize_run as summarize

    def shape(n, us, tall_ok=True):
        cfg = {"block_m": 16, "block_n": 32, "block_k": 128, "split_k": 1, "num_warps": 4, "num_stages": 4,
               "split_block_k": 0}
        return {"N": n, "K": 4096, "config": cfg, "us": {p: dict(zip(("64", "256"), t)) for p, t in us.items()},
                "bits_equal_decode": {"mid": True, "tall": tall_ok}}
    paths = {"m": [64, 256], "device": "H200", "shapes": [
        shape(1024, {"cublas": (10.0, 20.0), "decode": (20.0, 80.0), "mid": (10.0, 40.0), "tall": (20.0, 20.0)}),
        shape(2048, {"cublas": (10.0, 20.0), "decode": (40.0, 80.0), "mid": (10.0, 40.0), "tall": (40.0, 40.0)},
              tall_ok=False)]}
    (tmp_path / "decode_gemm_paths.json").write_text(json.dumps(paths))
    summarize.main([str(tmp_path)])
    out = json.loads((tmp_path / "summary.json").read_text())
    assert out["kind"] == "decode_gemm_paths", "the profile summarizer must not take decode_gemm_paths.json"
    assert out["rows_unequal_to_decode"] == [[2048, 4096, "tall"]]
    assert out["shapes"][0]["config"] == "m16 n32 k128 s1 st4" and out["shapes"][1]["us"]["mid"] == [10.0, 40.0]
    three = lambda x: float(f"{x:.3g}")   # noqa: E731 (three significant digits, as summaries keep)
    assert out["geomean_over"]["mid"]["64"] == {"decode": three((0.5 * 0.25) ** 0.5), "cublas": 1.0}
    assert out["geomean_over"]["tall"]["256"] == {"decode": three((0.25 * 0.5) ** 0.5), "cublas": three(2 ** 0.5)}


def test_geometry_table_rebuilds_from_the_tracked_summary():
    from vosti_plugin.integration.geometries import table

    run = RESULTS / "cpu-geometries-cold"
    assert table.rebuild(run) == (run / "README.md").read_text()
    rows = json.loads((run / "summary.json").read_text())["rows"]
    assert {r["model"] for r in rows} == set(table.GEOMETRIES)
