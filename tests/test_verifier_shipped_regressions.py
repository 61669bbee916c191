"""Issue 19: one-line regressions of the shipped kernels (tests/verifier_corpus/shipped_regressions.py) are
rejected under the kernels' own contracts with the named obligation at the named line, while the unmodified
source proves the same goal and config."""
import importlib
import inspect

import pytest

from vosti_plugin.verifier.api import catalog_entries
from vosti_plugin.verifier.check import check_goal
from vosti_plugin.verifier.contracts import contract_of
from vosti_plugin.verifier.frontend import kernel_from_source

from tests.verifier_corpus.shipped_regressions import REGRESSIONS


def _config(kernel_name: str, goal) -> dict:
    entry = next(e for e in catalog_entries() if e["kernel"].fn.__name__ == kernel_name)
    return next(c for c, _ in entry["configs"] if goal.applies(c))


def _ir(kernel, source: str, start: int):
    return kernel_from_source(source, name=kernel.fn.__name__, first_line=start,
                              filename=inspect.getsourcefile(kernel.fn), globals_=kernel.fn.__globals__)


@pytest.mark.parametrize("module,name,old,new,goal_name,obligation,line_text", REGRESSIONS,
                         ids=[f"{r[1]}-{r[4]}" for r in REGRESSIONS])
def test_shipped_regression_is_rejected_at_its_line(module, name, old, new, goal_name, obligation, line_text):
    kernel = getattr(importlib.import_module(module), name)
    spec = contract_of(kernel)
    goal = next(g for g in spec.verif if g.name == goal_name)
    lines, start = inspect.getsourcelines(kernel.fn)
    source = "".join(lines)
    assert source.count(old) == 1, f"{name} changed; update the regression"
    config = _config(name, goal)
    assert check_goal(_ir(kernel, source, start), spec, goal, config).status == "proved"
    report = check_goal(_ir(kernel, source.replace(old, new), start), spec, goal, config)
    assert report.status == "failed", str(report)
    assert report.failure.name == obligation, str(report)
    want = [start + i for i, text in enumerate(source.replace(old, new).splitlines()) if line_text in text]
    assert report.failure.line in want, f"named line {report.failure.line}, expected one of {want}: {report}"
