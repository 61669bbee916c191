"""The performance grid summary: one object per (model, batch, context) with every mode's tok/s, the agentic
replay and cold/warm startup, and the tables rebuilt from the summary alone."""
import json

import pytest

from vosti_plugin.integration.bench import grid


def _tp(mode, model, cells, startup=60.0, caches=None):
    return {"mode": mode, "backend": None, "model": model, "startup_s": startup,
            "compile_caches_at_start": caches if caches is not None else {"triton": 5, "vllm_torch_compile": 1},
            "rows": [{"batch": b, "context": c, "decode_tok_s": d, "prefill_tok_s": p} for b, c, d, p in cells]}


def _ag(mode, model, mean):
    return {"mode": mode, "backend": None, "model": model, "startup_s": 50.0, "total_s": 2 * mean,
            "mean_session_s": mean, "params": {"sessions": 4, "turns": 6}}


def _results():
    tp = [_tp("vosti-tma", "llama31-8b", [(4, 0, 700, 10), (4, 8192, 600, 30000)], startup=70.0),
          _tp("default", "llama31-8b", [(4, 0, 720, 12), (4, 8192, 640, 36000)], startup=50.0),
          _tp("bi", "llama31-8b", [(4, 0, 200, 9), (4, 8192, 180, 20000)], startup=75.0),
          _tp("vosti-pointer", "llama31-8b", [(4, 0, 1, 1)]),   # not the reported vosti mode: left out
          _tp("vosti-tma", "gemma3-4b", [(1, 1024, 300, 9000)])]
    startup = [_tp("vosti-tma", "llama31-8b", [], startup=140.0, caches={"triton": 0, "vllm_torch_compile": 0}),
               _tp("default", "llama31-8b", [], startup=100.0, caches={"triton": 0, "vllm_torch_compile": 0})]
    agentic = [_ag("vosti-tma", "llama31-8b", 10.0), _ag("bi", "llama31-8b", 30.0), _ag("default", "llama31-8b", 9.0)]
    return tp, agentic, startup


def test_cells_hold_each_mode_in_the_issue_format():
    tp, agentic, startup = _results()
    summary = grid.build(tp, agentic, startup, vosti_mode="vosti-tma")
    cells = {(c["model"], c["batch"], c["context"]): c for c in summary["cells"]}
    assert set(cells) == {("llama31-8b", 4, 0), ("llama31-8b", 4, 8192), ("gemma3-4b", 1, 1024)}
    c = cells[("llama31-8b", 4, 8192)]
    assert set(c) == {"model", "batch", "context", "decode_tok_s", "prefill_tok_s"}
    assert c["decode_tok_s"] == {"vosti": 600, "default": 640, "bi": 180}
    assert c["prefill_tok_s"] == {"vosti": 30000, "default": 36000, "bi": 20000}
    assert cells[("gemma3-4b", 1, 1024)]["decode_tok_s"] == {"vosti": 300, "default": None, "bi": None}
    assert summary["agentic"][0]["mean_session_s"] == {"vosti": 10.0, "default": 9.0, "bi": 30.0}
    starts = {(s["model"], s["mode"], s["caches"]): s["startup_s"] for s in summary["startup_s"]}
    assert starts[("llama31-8b", "vosti", "cold")] == 140.0 and starts[("llama31-8b", "vosti", "warm")] == 70.0
    assert starts[("llama31-8b", "default", "cold")] == 100.0


def test_tables_mark_misses_and_count_cells_meeting_each_target(tmp_path):
    tp, agentic, startup = _results()
    summary = grid.build(tp, agentic, startup, vosti_mode="vosti-tma")
    text = grid.markdown(summary)
    # 8K: decode 600/640 = 0.94x (miss), 600/180 = 3.33x; prefill 30000/36000 = 0.83x, 30000/20000 = 1.50x
    assert "| 4 | 8192 | 600 | 640 | 180 | 0.94x ✗ | 3.33x | 30000 | 36000 | 20000 | 0.83x | 1.50x |" in text
    assert "| 4 | 0 | 700 | 720 | 200 | 0.97x | 3.50x | 10 | 12 | 9 | - | - |" in text  # no prefill ratio at context 0
    assert "decode vs default 1/2; decode vs BI 2/2; prefill vs default 1/1; prefill vs BI 1/1" in text
    assert "| llama31-8b | 4 x 6 | 10.0 | 9.0 | 30.0 | 3.00x |" in text
    assert "| llama31-8b | cold | 140 | 100 | - | 1.40x ✗ |" in text and "| llama31-8b | warm | 70 | 50 | 75 | 1.40x ✗ |" in text


def test_cli_writes_the_summary_and_rebuilds_the_tables_from_it_alone(tmp_path):
    tp, agentic, startup = _results()
    paths = {}
    for name, results in (("tp", tp), ("ag", agentic), ("st", startup)):
        paths[name] = []
        for i, r in enumerate(results):
            p = tmp_path / f"{name}{i}.json"
            p.write_text(json.dumps(r))
            paths[name].append(str(p))
    out = tmp_path / "grid"
    assert grid.main(["--throughput", *paths["tp"], "--agentic", *paths["ag"], "--startup", *paths["st"],
                      "--vosti-mode", "vosti-tma", "--out", str(out)]) == 0
    table = (out / "grid.md").read_text()
    again = tmp_path / "again"
    assert grid.main(["--summary", str(out / "summary.json"), "--out", str(again)]) == 0
    assert (again / "grid.md").read_text() == table
    assert (out / "summary.json").stat().st_size < 20_000


def test_two_results_for_one_mode_and_cell_are_refused_and_no_results_is_an_error(tmp_path):
    tp, _, _ = _results()
    with pytest.raises(ValueError, match="two vosti results"):
        grid.build(tp + [tp[0]], [], [], vosti_mode="vosti-tma")
    p = tmp_path / "other.json"
    p.write_text(json.dumps(_tp("vosti-pointer", "llama31-8b", [(1, 0, 1, 1)])))
    with pytest.raises(SystemExit):
        grid.main(["--throughput", str(p), "--out", str(tmp_path / "x")])
