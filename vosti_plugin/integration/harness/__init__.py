"""Determinism harness: the four variation classes of the Vosti paper, run against real vLLM.

`vosti_plugin.integration.harness.run.compare(...)` is the entry point (used by `vosti compare`); each engine mode
runs in its own subprocess (`python -m vosti_plugin.integration.harness.worker`) that writes raw evidence, and the
parent compares it bit for bit and writes a Markdown table, a JSON file and a plot.
"""
