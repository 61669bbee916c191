"""VostiScheduler: vLLM's scheduler (FCFS, chunked prefill at any budget, preemption by recompute)
with the exact-prefix KV manager installed in place of vLLM's.

Per step: every prefix lookup of the step happens inside `Scheduler.schedule()`; the full pages the
step writes are only staged there, and published when the step is fully scheduled, so no lookup can
hit a page whose KV this step is still writing. A preempted request frees its pages; its registered
pages hold correct KV and may serve its own resumption, and its last token is always recomputed.
"""
from __future__ import annotations

from vosti_plugin import compat
from vosti_plugin.kvcache.audit import audit_requested
from vosti_plugin.kvcache.vllm_manager import VostiKVCacheManager


class VostiScheduler(compat.scheduler_base()):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.connector is not None:
            raise ValueError("vosti's KV cache does not support KV connectors (disaggregated prefill/offload)")
        policy = getattr(self.scheduler_config.policy, "value", self.scheduler_config.policy)
        if policy != "fcfs":
            raise ValueError(f"vosti schedules first-come-first-served; got policy={policy!r}")
        self.vosti_audit = audit_requested(getattr(self.vllm_config, "additional_config", None))
        self.kv_cache_manager = VostiKVCacheManager.adopt(self.kv_cache_manager, audit=self.vosti_audit)
        self.vosti_num_preemptions = 0

    def _preempt_request(self, request, *args, **kwargs) -> None:
        self.vosti_num_preemptions += 1
        super()._preempt_request(request, *args, **kwargs)

    def schedule(self, *args, **kwargs):
        manager: VostiKVCacheManager = self.kv_cache_manager
        try:
            output = super().schedule(*args, **kwargs)
            if self.vosti_audit:
                manager.audit_step_writes(output.num_scheduled_tokens, self.requests)
        except BaseException:
            manager.discard_staged()
            raise
        manager.publish_step()
        return output
