"""Integration harnesses and benchmarks that run real vLLM (CPU CI and the GPU target)."""

from pathlib import Path

# the directory that holds the vosti_plugin package (a checkout's root, or site-packages): what a child
# process started by the tooling needs on PYTHONPATH to import the same vosti_plugin
SOURCE_ROOT = Path(__file__).resolve().parents[2]
