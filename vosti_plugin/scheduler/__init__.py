"""Public class paths `vosti_plugin.scheduler.VostiScheduler` (vosti's default `scheduler_cls`) and
`vosti_plugin.scheduler.VostiAsyncScheduler`. The classes live in the vLLM adapter
(vosti_plugin.vllm.scheduler) and are imported on first use, so importing this package imports no vLLM."""
__all__ = ["VostiAsyncScheduler", "VostiScheduler"]


def __getattr__(name: str):
    if name in __all__:
        from vosti_plugin.vllm import scheduler

        return getattr(scheduler, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
