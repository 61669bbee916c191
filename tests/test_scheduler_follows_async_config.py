"""`scheduler_cls="vosti_plugin.scheduler.VostiScheduler"` must give the async-aware scheduler exactly when
vLLM's final config has async scheduling on (vLLM decides that after vosti's engine arguments)."""
from types import SimpleNamespace

import pytest

from vosti_plugin.scheduler import VostiAsyncScheduler, VostiScheduler
from vosti_plugin.selection import SCHEDULER_PATH


def _config(async_scheduling):
    return SimpleNamespace(scheduler_config=SimpleNamespace(async_scheduling=async_scheduling))


@pytest.mark.parametrize("async_scheduling, expected", [(True, VostiAsyncScheduler), (False, VostiScheduler),
                                                        (None, VostiScheduler)])
@pytest.mark.parametrize("positional", [False, True])
def test_vosti_scheduler_class_follows_final_async_setting(async_scheduling, expected, positional):
    config = _config(async_scheduling)
    args, kwargs = ((config,), {}) if positional else ((), {"vllm_config": config})
    instance = VostiScheduler.__new__(VostiScheduler, *args, **kwargs)   # __init__ needs a whole engine
    assert type(instance) is expected


def test_explicit_async_scheduler_stays_async_when_config_is_sync():
    assert type(VostiAsyncScheduler.__new__(VostiAsyncScheduler, vllm_config=_config(False))) is VostiAsyncScheduler


@pytest.mark.parametrize("given", [None, True, False])
def test_vllm_config_keeps_the_users_async_choice_and_vosti_scheduler(given, tiny_model_path):
    """Real vLLM (CPU): vosti leaves async_scheduling to the user and vLLM, and installs VostiScheduler,
    which is built as the scheduler matching vLLM's final decision (the CPU platform turns async off)."""
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(model=tiny_model_path, attention_backend="vosti", async_scheduling=given,
                      dtype="float32", max_model_len=256)
    config = args.create_engine_config()
    assert args.async_scheduling is given        # vosti's preparation left the user's choice alone
    assert config.scheduler_config.scheduler_cls == SCHEDULER_PATH
    assert config.scheduler_config.async_scheduling is False
    cls = config.scheduler_config.get_scheduler_cls()
    assert type(cls.__new__(cls, vllm_config=config)) is VostiScheduler
    from vosti_plugin.launch.facts import facts_from_vllm_config

    assert facts_from_vllm_config(config).scheduler_built.endswith(".VostiScheduler")


@pytest.mark.parametrize("async_scheduling", [True, False])
def test_launch_facts_name_the_scheduler_the_engine_builds(async_scheduling):
    from vosti_plugin.vllm.launch_facts import _built_scheduler

    built = _built_scheduler(SCHEDULER_PATH, async_scheduling)
    expected = VostiAsyncScheduler if async_scheduling else VostiScheduler
    assert built == f"{expected.__module__}.{expected.__qualname__}"
    assert _built_scheduler("vosti_plugin.scheduler.VostiAsyncScheduler", False).endswith("VostiAsyncScheduler")
    assert _built_scheduler("no.such.Scheduler", async_scheduling) == "no.such.Scheduler"
