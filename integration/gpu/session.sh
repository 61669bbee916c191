#!/usr/bin/env bash
# One step of the H200 session (vLLM 0.26.0 already staged into /tmp/site by ../shared/gpu/README.md).
# Usage: bash integration/gpu/session.sh STEP   with STEP in: smoke bench agentic harness profile kernels
# harness: MODES (default vosti,default,bi-flash), PER_GPU (modes sharing the GPU at once), HARNESS_ARGS
# Writes JSON/logs under $OUT (or ./gpu-out). Each mode runs in its own process.
set -uo pipefail
step=${1:?step}
out=${OUT:-gpu-out}; mkdir -p "$out"
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
if ! python3 -c "import z3" 2>/dev/null && ls .whl/z3_solver-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/z3_solver-*.whl
fi
python3 -c "import vllm, z3, vosti_plugin; print('vllm', vllm.__version__, 'z3', z3.get_version_string())" || exit 3
mdl=${MODEL:-llama31-8b}
ctx=${CONTEXTS:-0,1024,8192,16384}
bat=${BATCHES:-4}
case "$step" in
  smoke)
    timeout 400 python3 -m vosti_plugin.integration.bench.throughput --mode vosti --model "$mdl" --contexts 1024 --batches 4 \
      --decode-tokens 32 --out "$out/smoke_vosti.json" 2>&1 | tee "$out/smoke.log" | grep -v "^INFO\|^(EngineCore" | tail -40 ;;
  bench)
    for m in ${BENCH_MODES:-vosti default bi}; do
      timeout ${MODE_TIMEOUT:-280} python3 -m vosti_plugin.integration.bench.throughput --mode $m --model "$mdl" --contexts "$ctx" \
        --batches "$bat" --decode-tokens ${DECODE:-128} --repeats ${REPEATS:-3} ${BENCH_ARGS:-} --out "$out/tp_${mdl}_$m.json" \
        > "$out/tp_${mdl}_$m.log" 2>&1
      echo "== $m rc=$?"; grep -E '^\{|startup|Error|error' "$out/tp_${mdl}_$m.log" | tail -8
    done
    python3 -m vosti_plugin.integration.bench.report --throughput "$out"/tp_${mdl}_*.json --out "$out" ;;
  agentic)
    for m in ${BENCH_MODES:-vosti default bi}; do
      timeout ${MODE_TIMEOUT:-250} python3 -m vosti_plugin.integration.bench.agentic --mode $m --model "$mdl" \
        ${AGENTIC_ARGS:-} --out "$out/ag_${mdl}_$m.json" > "$out/ag_${mdl}_$m.log" 2>&1
      echo "== $m rc=$?"; tail -3 "$out/ag_${mdl}_$m.log"
    done
    python3 -m vosti_plugin.integration.bench.report --agentic "$out"/ag_${mdl}_*.json --out "$out" ;;
  harness)
    timeout ${HARNESS_TIMEOUT:-560} python3 -m vosti_plugin.integration.harness.cli --scale gpu --models "$mdl" \
      --modes ${MODES:-vosti,default,bi-flash} --per-gpu ${PER_GPU:-1} ${HARNESS_ARGS:-} --out "$out/harness" 2>&1 | tail -40 ;;
  profile)
    for m in ${PROFILE_MODES:-vosti vosti-sync}; do
      timeout ${MODE_TIMEOUT:-200} python3 integration/gpu/profile_decode.py --mode $m --model "$mdl" --batch "${bat%%,*}" \
        --context ${PROFILE_CONTEXT:-1024} --phase ${PROFILE_PHASE:-decode} --out "$out/prof_${mdl}_$m.json" > "$out/prof_${mdl}_$m.log" 2>&1
      echo "== $m rc=$?"; grep -E '^\{|SUMMARY|Error' "$out/prof_${mdl}_$m.log" | head -12
    done ;;
  kernels)
    timeout 280 python3 integration/gpu/attention_check.py --budget-s 200 --out "$out/attention.json" 2>&1 | tail -25
    timeout 280 python3 integration/gpu/dense_bench.py --budget-s 220 --out "$out/dense.json" 2>&1 | tail -45 ;;
  *) echo "unknown step $step"; exit 2 ;;
esac
