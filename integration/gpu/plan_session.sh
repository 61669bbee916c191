#!/usr/bin/env bash
# The H200 session plan of #9, in priority order; writes everything under ${RES:-/root/res} and logs each step
# to plan.log. Run it detached so it outlives one device call, and collect with integration/gpu/collect.sh:
#   setsid nohup bash integration/gpu/plan_session.sh > /root/plan.out 2>&1 < /dev/null &
# The tall GEMM path is benchmarked (mode vosti-tall) only when tall_gemm_check finds every row bit-equal.
R=${RES:-/root/res}; mkdir -p "$R/tall"
export PYTHONUNBUFFERED=1
log() { echo "[$(date +%T)] $*" >> "$R/plan.log"; }
grid() { env OUT="$R/$1" MODEL="$2" BENCH_MODES="$3" CONTEXTS=0,1024,4096,8192,16384 BATCHES=${4:-1,4,16} DECODE=128 \
  MODE_TIMEOUT=280 bash integration/gpu/session.sh bench > "$R/$1.log" 2>&1; }
log start
timeout 200 python3 integration/gpu/tall_gemm_check.py --quick --no-sweep --budget-s 150 --out "$R/tall/tall_gemm.json" \
  > "$R/tall.log" 2>&1; rc=$?
log "tall rc=$rc $(grep 'TALL BITS' "$R/tall.log")"
if [ $rc = 0 ]; then V=vosti-tall; else V=vosti; fi
grid bench-llama llama31-8b "$V default bi"; log "bench-llama done ($V default bi)"
if [ $V = vosti-tall ]; then grid bench-llama llama31-8b vosti 4; log "bench-llama vosti (tall off, batch 4) done"; fi
env OUT="$R/agentic" BENCH_MODES="$V bi default" MODE_TIMEOUT=260 bash integration/gpu/session.sh agentic \
  > "$R/agentic.log" 2>&1; log "agentic done"
grid bench-gemma gemma3-4b "$V default bi"; log "bench-gemma done"
env OUT="$R/profile" PROFILE_MODES="$V" PROFILE_CONTEXT=16384 BATCHES=16 MODE_TIMEOUT=200 \
  bash integration/gpu/session.sh profile > "$R/profile.log" 2>&1; log "profile done"
timeout 300 python3 integration/gpu/tall_gemm_check.py --quick --no-timing --budget-s 240 \
  --out "$R/tall/tall_sweep.json" > "$R/tall_sweep.log" 2>&1
log "ALL DONE"
