"""vosti_plugin.integration.harness.merge: later runs fill in and override cells; classes no run compared stay empty."""
import json

from vosti_plugin.integration.harness.merge import markdown, merge_runs


def _run(tmp_path, name, rows):
    d = tmp_path / name
    d.mkdir()
    (d / "results.json").write_text(json.dumps({"rows": rows}))
    return d


def _row(model, mode, **tallies):
    return {"model": model, "mode": mode, "label": f"L-{mode}",
            "tallies": {c: {"matches": m, "compared": n, "not_run": 0} for c, (m, n) in tallies.items()}}


def test_later_runs_fill_in_and_override_and_rows_group_by_model(tmp_path):
    first = _run(tmp_path, "first", [_row("a", "vosti", batch=(288, 288), chunk=(0, 0)),
                                     _row("b", "vosti", batch=(5, 9))])
    second = _run(tmp_path, "second", [_row("b", "vosti", batch=(9, 9), prefix=(14, 14)),
                                       _row("a", "bi", batch=(1, 288))])
    cells, labels = merge_runs([first, second])
    assert cells[("a", "vosti")]["batch"].run == "first"
    assert "chunk" not in cells[("a", "vosti")]                 # compared nothing: no cell
    assert (cells[("b", "vosti")]["batch"].matches, cells[("b", "vosti")]["batch"].run) == (9, "second")
    lines = markdown(cells, labels).splitlines()[2:]
    assert [line.split(" | ")[0:2] for line in lines] == [["| a", "L-vosti"], ["| a", "L-bi"], ["| b", "L-vosti"]]
    assert lines[0].split(" | ")[3] == "—"
