"""`vosti verify` as a user meets it outside a terminal (typer's CliRunner is not a tty): unknown kernels are
a usage error listing the known ones, --help names the kernels, the default view is one row per kernel
family, --all gives every row uncut, a one-line summary is always last, bad --json paths fail cleanly."""
import json
import re

import pytest
from typer.testing import CliRunner

from vosti_plugin.cli import app

SUMMARY = re.compile(r"^summary: kernel contracts: (\d+) proved, (\d+) failed of (\d+) \((\d+) from cache\).* in "
                     r"[0-9.]+ s$")


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


def _last_line(output: str) -> str:
    return output.rstrip("\n").splitlines()[-1]


def test_unknown_kernel_is_a_usage_error_listing_the_known_kernels(runner):
    result = runner.invoke(app, ["verify", "--kernel", "nosuch"])
    assert result.exit_code == 2, result.output
    assert "unknown kernel 'nosuch'" in result.output
    for name in ("mm_kernel", "rms_norm_kernel", "_paged_attention_segments_kernel", "launch:matmul"):
        assert name in result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)


def test_help_lists_the_kernel_names(runner):
    result = runner.invoke(app, ["verify", "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for name in ("--all", "paged_attention", "_write_kv_kernel", "softmax_kernel", "act_and_mul_kernel"):
        assert name in text, name


def test_default_view_of_one_family_is_one_row_and_the_summary(runner):
    result = runner.invoke(app, ["verify", "--kernel", "activation"])
    assert result.exit_code == 0, result.output
    summary = SUMMARY.match(_last_line(result.output))
    assert summary, _last_line(result.output)
    proved, failed, total = int(summary[1]), int(summary[2]), int(summary[3])
    assert failed == 0 and proved == total > 1
    families = [line.split("│")[1].strip() for line in result.output.splitlines() if line.count("│") > 2]
    assert families.count("activation") == 1, result.output
    assert "act_and_mul_kernel" not in result.output, "the default view lists rows, not the family"


# The whole catalog: about 19 minutes of proofs on 2 cores when the proof cache is cold (a fresh CI machine).
@pytest.mark.slow
def test_default_view_is_per_family_and_ends_with_the_summary(runner):
    result = runner.invoke(app, ["verify"])
    assert result.exit_code == 0, result.output
    summary = SUMMARY.match(_last_line(result.output))
    assert summary, _last_line(result.output)
    proved, failed, total = int(summary[1]), int(summary[2]), int(summary[3])
    assert failed == 0 and proved == total > 100
    lines = result.output.splitlines()
    assert len(lines) < 40, "the default view must not list every row"
    for family in ("matmul", "rms_norm", "softmax", "activation", "paged_attention", "kv_write", "launch"):
        assert any(line.split("│")[1:2] and line.split("│")[1].strip() == family for line in lines), family


def test_all_rows_are_whole_lines_outside_a_terminal(runner, tmp_path):
    path = tmp_path / "verify.json"
    result = runner.invoke(app, ["verify", "--kernel", "rms_norm", "--all", "--json", str(path)])
    assert result.exit_code == 0, result.output
    rows = json.loads(path.read_text())["results"]
    kernels = ("rms_norm_kernel", "norm_add_rms_norm_kernel")
    assert rows and all(r["kernel"] in (*kernels, "launch:rmsnorm") for r in rows)
    table_rows = [line for line in result.output.splitlines() if "rms_norm_kernel" in line]
    assert len(table_rows) == sum(r["kernel"] in kernels for r in rows)
    assert "…" not in result.output, "cells were cut at the console width"
    widest = max(rows, key=lambda r: len(json.dumps(r["config"])))
    config_text = ",".join(f"{k}={v}" for k, v in widest["config"].items())
    assert config_text in result.output
    summary = SUMMARY.match(_last_line(result.output))
    assert summary and int(summary[3]) == len(rows)


@pytest.mark.parametrize("where", ["missing directory", "parent is a file", "a directory"])
def test_unwritable_json_path_is_a_clean_usage_error(runner, tmp_path, where):
    blocker = tmp_path / "file"
    blocker.write_text("")
    path = {"missing directory": tmp_path / "nonexistent" / "dir" / "x.json",
            "parent is a file": blocker / "x.json",
            "a directory": tmp_path}[where]
    result = runner.invoke(app, ["verify", "--json", str(path)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: --json ") and "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)
