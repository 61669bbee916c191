"""`vosti verify --model`: the same launch check, offline, without starting an engine."""
from __future__ import annotations

from dataclasses import dataclass

from vosti_plugin.launch.facts import LaunchFacts


@dataclass(frozen=True)
class ObligationStatus:
    name: str
    description: str
    ok: bool
    reason: str | None
    fix: str


def build_vllm_config(model: str, vllm_args: list[str]):
    """vLLM's own config for `vllm serve MODEL --attention-backend vosti ARGS`, built without an engine."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from vosti_plugin import register, selection

    register()
    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    args = parser.parse_args(["--model", model, "--attention-backend", "vosti", *vllm_args])
    engine_args = EngineArgs.from_cli_args(args)
    selection.prepare_engine_args(engine_args)
    stock_create = getattr(EngineArgs.create_engine_config, "__wrapped__", EngineArgs.create_engine_config)
    return stock_create(engine_args)


def check_model(model: str, vllm_args: list[str]) -> tuple[LaunchFacts, list[ObligationStatus]]:
    from vosti_plugin.launch.check import plugin_manager, run_check
    from vosti_plugin.launch.facts import facts_from_vllm_config
    from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

    ensure_interpreter_without_gpu()
    facts = facts_from_vllm_config(build_vllm_config(model, vllm_args))
    pm = plugin_manager()
    obligations = [ob for group in pm.hook.vosti_launch_obligations(facts=facts) if group for ob in group]
    failures = {f.obligation: f for f in run_check(facts, pm)}
    statuses = [ObligationStatus(ob.name, ob.description, ob.name not in failures,
                                 failures[ob.name].reason if ob.name in failures else None, ob.fix)
                for ob in obligations]
    known = {ob.name for ob in obligations}
    statuses += [ObligationStatus(f.obligation, "third-party veto", False, f.reason, f.fix)
                 for f in failures.values() if f.obligation not in known]
    return facts, statuses
