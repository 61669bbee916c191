"""vLLM schedulers that install vosti's exact-prefix KV block manager."""
from vosti_plugin.scheduler.vosti_scheduler import VostiAsyncScheduler, VostiScheduler

__all__ = ["VostiAsyncScheduler", "VostiScheduler"]
