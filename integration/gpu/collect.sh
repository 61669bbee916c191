#!/usr/bin/env bash
# Wait up to $1 s for plan_session.sh to finish, pack ${RES:-/root/res} into $OUT/res.tgz, then print its progress
# (packed first, so a reader that stops early, e.g. `| head`, still gets the results back).
R=${RES:-/root/res}
end=$(( $(date +%s) + ${1:-500} ))
while ! grep -q "ALL DONE" "$R/plan.log" 2>/dev/null && [ "$(date +%s)" -lt $end ]; do sleep 5; done
if [ -n "${OUT:-}" ]; then tar -C "$(dirname "$R")" -czf "$OUT/res.tgz" "$(basename "$R")"; fi
cat "$R/plan.log"
for f in "$R"/*.log; do
  echo "== $f"; tail -c 3000 "$f" | tr '\r' '\n' | grep -v '^$' | grep -v '^INFO\|^(EngineCore\|WARNING' | tail -14
done
