"""End to end on CPU: vosti matches bit for bit in all four variation classes; stock vLLM ran too.

Runs `vosti_plugin.integration.harness.run.compare` at the CPU scale (each mode in its own vLLM process; vosti's
kernels through Triton's interpreter): a few minutes."""
import pytest

from vosti_plugin.integration.harness.scale import CPU

pytestmark = pytest.mark.vllm


def test_vosti_is_bitwise_deterministic_in_every_variation_class(tmp_path):
    from vosti_plugin.integration.harness.run import compare

    summary = compare("cpu", ["vosti", "default"], ["tiny"], tmp_path, online=False)
    vosti, default = summary.row("tiny", "vosti"), summary.row("tiny", "default")

    assert vosti.status == "ok", vosti.reason
    assert vosti.sanity["passed"], vosti.sanity
    for cls, planned in CPU.planned.items():
        t = vosti.tallies[cls]
        assert t.compared == planned, f"{cls}: {t.not_run} case(s) did not run"
        assert t.matches == t.compared, [
            (c.case, c.first_divergence, c.max_abs_diff) for c in vosti.comparisons if c.cls == cls and not c.match]

    assert default.status == "ok", default.reason
    assert all(default.tallies[cls].compared > 0 for cls in CPU.planned), default.tallies

    assert summary.ok
    for name in ("results.md", "summary.json", "results.json", "match_rate.png"):
        assert (tmp_path / name).stat().st_size > 0
