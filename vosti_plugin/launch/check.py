"""Run every launch obligation (built-in and third-party) and refuse or certify the launch."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pluggy

from vosti_plugin.launch import guard, hookspecs
from vosti_plugin.launch.builtin import BuiltinRules
from vosti_plugin.launch.facts import LaunchFacts, facts_from_vllm_config
from vosti_plugin.launch.log import vosti_logger
from vosti_plugin.launch.obligations import Failure, LaunchRefused, evaluate_all
from vosti_plugin.launch.verified import wanted_configs

CERTIFICATE_LOG_PREFIX = "vosti determinism certificate: "
CERTIFICATE_ENV = "VOSTI_CERTIFICATE"
_accepted: dict[str, dict] = {}
_checked: set[str] = set()


def plugin_manager(extra_plugins=()) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(BuiltinRules(), name="vosti-builtin")
    pm.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
    for plugin in extra_plugins:
        pm.register(plugin)
    return pm


def run_check(facts: LaunchFacts, pm: pluggy.PluginManager | None = None) -> list[Failure]:
    pm = pm or plugin_manager()
    obligations = [ob for group in pm.hook.vosti_launch_obligations(facts=facts) if group for ob in group]
    failures = evaluate_all(obligations, facts)
    for vetoes in pm.hook.vosti_check_launch(facts=facts, failures=tuple(failures)):
        failures.extend(vetoes or ())
    return failures


def check_launch_or_raise(vllm_config, pm=None, certificate_path: str | os.PathLike | None = None) -> dict:
    """Refuse (raise LaunchRefused) or write and return the determinism certificate (file and log)."""
    _quiet_interpreter()
    facts = facts_from_vllm_config(vllm_config)
    path = certificate_path or os.environ.get(CERTIFICATE_ENV) or _additional_config_path(vllm_config)
    key = _check_key(facts, path)
    if pm is None and key in _accepted:
        return _accepted[key]
    t0 = time.perf_counter()
    pm = pm or plugin_manager()
    failures = run_check(facts, pm)
    if failures:
        raise LaunchRefused(failures)
    from vosti_plugin.launch.certificate import build_certificate

    cert = build_certificate(facts, vllm_config, seconds=time.perf_counter() - t0)
    for extra in pm.hook.vosti_certificate(facts=facts, certificate=cert):
        cert.update(extra or {})
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(cert, indent=2, sort_keys=True))
    vosti_logger().info("%s%s", CERTIFICATE_LOG_PREFIX, json.dumps(cert, sort_keys=True))
    _accepted[key] = cert
    _checked.add(_check_key(facts, None))
    guard.arm_for_serving(getattr(vllm_config, "additional_config", None), wanted_configs(facts))
    return cert


def check_in_engine_process(vllm_config, where: str) -> LaunchFacts | None:
    """The same check where the final config lands (engine core's scheduler, each worker); a refusal
    here aborts startup too. Certificates are written where the config was built, not again here.
    Returns the facts it accepted (None: vosti is not selected)."""
    from vosti_plugin import selection

    if not selection.selected_in_config(vllm_config):
        return None
    _quiet_interpreter()
    facts = facts_from_vllm_config(vllm_config)
    key = _check_key(facts, None)
    if key in _checked:
        return facts
    failures = run_check(facts)
    if failures:
        raise LaunchRefused(failures)
    _checked.add(key)
    guard.arm_for_serving(getattr(vllm_config, "additional_config", None), wanted_configs(facts))
    vosti_logger().info("vosti launch check passed in %s", where)
    return facts


def _check_key(facts: LaunchFacts, certificate_path) -> str:
    """What a cached verdict depends on: the facts, where the certificate goes, and which third-party
    rule plugins are installed now (one installed later must still be consulted)."""
    from importlib.metadata import entry_points

    rules = sorted(f"{ep.name}={ep.value}" for ep in entry_points(group=hookspecs.ENTRY_POINT_GROUP))
    return json.dumps([facts.to_dict(), str(certificate_path or ""), rules], sort_keys=True, default=str)


def _additional_config_path(vllm_config):
    extra = getattr(vllm_config, "additional_config", None) or {}
    vosti = extra.get("vosti") if isinstance(extra, dict) else None
    return (vosti or {}).get("certificate") if isinstance(vosti, dict) else None


def _quiet_interpreter() -> None:
    """Every process that runs vosti's kernels passes a launch check first; quiet the interpreter's
    masked-lane warnings there (vosti's kernels only)."""
    from vosti_plugin import interpreter_warnings

    interpreter_warnings.install()
