"""The report's decode-step table: ms per step from the bench rows, and vosti's gap to vLLM default split
into the part already there at context 0 and the part that grows with context."""
from vosti_plugin.integration.bench.report import step_gap_markdown, step_ms


def _row(batch, context, step_ms_value, tokens=128, method="cached"):
    steps = tokens + (method == "cached")
    decode_s = step_ms_value * steps / 1e3
    return {"batch": batch, "context": context, "decode_s": decode_s, "decode_method": method,
            "decode_tok_s": batch * tokens / decode_s, "prefill_tok_s": 1.0, "decode_floor_tok_s": 1.0}


def test_step_ms_counts_the_tail_step_of_a_cached_run():
    assert abs(step_ms(_row(4, 1024, 6.5)) - 6.5) < 1e-9
    assert abs(step_ms(_row(4, 1024, 6.5, method="subtracted")) - 6.5) < 1e-9


def test_gap_splits_into_context_zero_and_context_growing_parts():
    vosti = {"mode": "vosti", "rows": [_row(1, 0, 5.0), _row(1, 4096, 6.5), _row(4, 4096, 9.0)]}
    default = {"mode": "default", "rows": [_row(1, 0, 4.5), _row(1, 4096, 5.25), _row(4, 4096, 7.0)]}
    table = step_gap_markdown([vosti, default, {"mode": "bi", "rows": [_row(1, 0, 17.0)]}])
    rows = {tuple(c.strip() for c in line.strip("|").split("|"))[1:3]: [c.strip() for c in line.strip("|").split("|")]
            for line in table.splitlines()[2:]}
    assert rows[("1", "0")][3:] == ["5.00", "4.50", "0.50", "0.50", "0.00"]
    assert rows[("1", "4096")][3:] == ["6.50", "5.25", "1.25", "0.50", "0.75"]
    assert rows[("4", "4096")][3:] == ["9.00", "7.00", "2.00", "-", "-"]   # no context-0 row at batch 4


def test_no_table_without_default_or_vosti():
    assert step_gap_markdown([{"mode": "bi", "rows": [_row(1, 0, 17.0)]}]) == ""


def test_targets_table_counts_cells_meeting_each_target():
    from vosti_plugin.integration.bench.report import targets_markdown

    def rows(decode, prefill):
        return [{**_row(b, c, 1000.0 * b / d), "prefill_tok_s": p}
                for (b, c), d, p in zip(((1, 0), (1, 1024), (4, 1024)), decode, prefill)]

    vosti = {"mode": "vosti", "rows": rows((180, 170, 600), (100, 20000, 30000))}
    default = {"mode": "default", "rows": rows((200, 200, 700), (110, 40000, 36000))}
    bi = {"mode": "bi", "rows": rows((50, 60, 200), (50, 30000, 30000))}
    table = targets_markdown([vosti, default, bi]).splitlines()
    assert table[2] == "| vosti | decode vs BI | 3.20x | 2.83-3.60x | 1/3 |"       # 3.6, 2.83, 3.0
    assert table[3] == "| vosti | decode vs default | 0.95x | 0.85-0.90x | 0/3 |"   # 0.9, 0.85, 0.857
    assert table[4] == "| vosti | prefill vs default | 0.80x | 0.50-0.83x | 1/2 |"  # context 0 left out
    assert table[5] == "| vosti | prefill vs BI | 1.30x | 0.67-1.00x | 0/2 |"


def test_the_report_names_kernels_compiled_while_serving_from_each_modes_log(tmp_path):
    """A per-mode JSON's log beside it (vLLM's JIT monitor lines, as session 34's Gemma engines logged them) gives the
    kernels compiled after warm-up; a mode whose log has none says so; summary.json keeps both."""
    import json

    from vosti_plugin.integration.bench.report import main

    warning = ("(EngineCore pid=1541) WARNING 12-06 13:46:24 [jit_monitor.py:135] Triton kernel JIT compilation during "
               "inference: _paged_attention_segments_kernel. This causes a latency spike; consider extending warmup to "
               "cover this shape/config.\n")
    for mode, log in (("vosti", "startup\n" + warning), ("default", "startup\nno monitor line\n")):
        (tmp_path / f"tp_m_{mode}.json").write_text(json.dumps({"mode": mode, "rows": [_row(4, 1024, 6.0)]}))
        (tmp_path / f"tp_m_{mode}.log").write_text(log)
    out = tmp_path / "out"
    main(["--throughput", str(tmp_path / "tp_m_vosti.json"), str(tmp_path / "tp_m_default.json"), "--out", str(out),
          "--no-plot"])
    text = (out / "bench.md").read_text()
    assert "| vosti | _paged_attention_segments_kernel |" in text and "| default | none |" in text
    kept = {r["mode"]: r["compiled_while_serving"] for r in json.loads((out / "summary.json").read_text())["throughput"]}
    assert kept == {"vosti": ["_paged_attention_segments_kernel"], "default": []}
