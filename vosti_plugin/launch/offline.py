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
    follows_from: str | None = None     # failed only because this other obligation failed (fixing it fixes both)
    fix_args: tuple[str, ...] = ()      # vLLM arguments that apply the fix

    @property
    def cause(self) -> bool:
        return not self.ok and self.follows_from is None


def build_vllm_config(model: str, vllm_args: list[str]):
    """vLLM's own config for `vllm serve MODEL --attention-backend vosti ARGS`, built without an engine."""
    from vosti_plugin.vllm.launch_facts import build_vllm_config as build

    return build(model, vllm_args)


def offline_facts(model: str, vllm_args: list[str]) -> LaunchFacts:
    """The launch's facts; a multimodal checkpoint whose vLLM module cannot be imported here is read
    through its text tower, keeping the shipped architecture and whether it would take images."""
    import dataclasses

    from vosti_plugin.launch.facts import facts_from_vllm_config
    from vosti_plugin.vllm.launch_facts import build_offline_config

    vllm_config, stand_in = build_offline_config(model, vllm_args)
    facts = facts_from_vllm_config(vllm_config)
    if stand_in is None:
        return facts
    return dataclasses.replace(facts, architecture=stand_in.architecture,
                               multimodal_inputs=stand_in.multimodal_inputs,
                               extra={**facts.extra, "text_tower": stand_in.note()})


def check_model(model: str, vllm_args: list[str], platform: str | None = None
                ) -> tuple[LaunchFacts, list[ObligationStatus]]:
    """Every obligation's status for this launch; causes first where they fail (see obligations.evaluate_all).
    platform: check the launch as it would be on that platform ("cuda": a GPU deployment checked from a
    CPU-only machine); default: this machine's."""
    from vosti_plugin.launch.check import _quiet_interpreter, plugin_manager, run_check
    from vosti_plugin.launch.obligations import every_failure
    from vosti_plugin.launch.prove_ahead import proving_ahead
    from vosti_plugin.triton_mode import ensure_interpreter_without_gpu

    ensure_interpreter_without_gpu()
    _quiet_interpreter()
    with proving_ahead():
        facts = offline_facts(model, vllm_args)
        if platform and platform != facts.platform:
            import dataclasses

            facts = dataclasses.replace(facts, platform=platform)
        pm = plugin_manager()
        obligations = [ob for group in pm.hook.vosti_launch_obligations(facts=facts) if group for ob in group]
        failed = {f.obligation: (f, cause) for f, cause in every_failure(run_check(facts, pm))}
    statuses = []
    for ob in obligations:
        if ob.name in failed:
            f, cause = failed.pop(ob.name)
            statuses.append(ObligationStatus(ob.name, ob.description, False, f.reason, f.fix, cause, f.fix_args))
        else:
            statuses.append(ObligationStatus(ob.name, ob.description, True, None, ob.fix))
    statuses += [ObligationStatus(f.obligation, "third-party veto", False, f.reason, f.fix, cause, f.fix_args)
                 for f, cause in failed.values()]
    return facts, statuses
