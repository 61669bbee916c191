"""vLLM scheduler that installs vosti's exact-prefix KV block manager."""
from vosti_plugin.scheduler.vosti_scheduler import VostiScheduler

__all__ = ["VostiScheduler"]
