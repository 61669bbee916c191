"""The kernel modules whose launches the verifier proves (plain data: importing this imports nothing).

Each module exports `verifier_catalog() -> [{"family", "kernel", "configs": [(constexprs, launch-config
fields)]}]`: every constexpr config its launch wrappers can run, and the @contract'ed kernel it runs. The
verifier reads this list (`vosti_plugin.verifier.api.catalog_modules`); its proof-cache fingerprint is the import closure
of these modules (vosti_plugin/verifier/fingerprint.py); the runtime launch guard checks each launch against the configs
proved for them (vosti_plugin/launch/guard.py).
"""
KERNEL_MODULES = (
    "vosti_plugin.ops.matmul",
    "vosti_plugin.ops.rmsnorm",
    "vosti_plugin.ops.softmax",
    "vosti_plugin.ops.activation",
    "vosti_plugin.attention.paged_attention",
    "vosti_plugin.attention.kv_write",
    "vosti_plugin.sampling.top_k_top_p",
)
