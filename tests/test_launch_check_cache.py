"""A cached launch verdict is reused only for the same facts, the same certificate destination and the
same installed third-party rules (the full suite runs many engines in one process)."""
import json
import sys
import textwrap

import pytest

from tests.test_launch_obligations import GOOD
from vosti_plugin import selection
from vosti_plugin.launch import check
from vosti_plugin.launch.obligations import LaunchRefused


@pytest.fixture
def fresh_cache(monkeypatch):
    monkeypatch.setattr(check, "_accepted", {})
    monkeypatch.setattr(check, "_checked", set())
    monkeypatch.setattr(check, "facts_from_vllm_config", lambda _config: GOOD)
    monkeypatch.setattr(selection, "selected_in_config", lambda _config: True)
    monkeypatch.delenv(check.CERTIFICATE_ENV, raising=False)


def _install_veto(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "acme_cache_rules.py").write_text(textwrap.dedent('''
        from vosti_plugin.launch.hookspecs import hookimpl
        from vosti_plugin.launch.obligations import Failure

        @hookimpl
        def vosti_check_launch(facts, failures):
            return [Failure("acme-veto", "always", "uninstall acme")]
    '''))
    dist = site / "acme_cache_rules-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-cache-rules\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[vosti.launch_checks]\nacme = acme_cache_rules\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "acme_cache_rules", raising=False)


def test_certificate_is_written_after_the_same_launch_was_accepted_without_one(fresh_cache, tmp_path, monkeypatch):
    check.check_launch_or_raise(None)
    check.check_in_engine_process(None, "worker")
    cert_path = tmp_path / "cert.json"
    monkeypatch.setenv(check.CERTIFICATE_ENV, str(cert_path))
    check.check_launch_or_raise(None)
    assert json.loads(cert_path.read_text())["kind"] == "vosti-determinism-certificate"


@pytest.mark.parametrize("where", ["config", "engine"])
def test_rule_plugin_installed_after_an_accepted_launch_is_consulted(fresh_cache, tmp_path, monkeypatch, where):
    run = (lambda: check.check_launch_or_raise(None)) if where == "config" else (
        lambda: check.check_in_engine_process(None, "worker"))
    run()
    _install_veto(tmp_path, monkeypatch)
    with pytest.raises(LaunchRefused, match="acme-veto"):
        run()
