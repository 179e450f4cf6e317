#!/usr/bin/env bash
# 1 GB of output through agent-exec, and the hard output cap.
#
#   bash scripts/bench-output.sh          # full run
#   SMOKE=1 bash scripts/bench-output.sh  # 100 MB, one run each
#
# Drain: `head -c 1000000000 /dev/zero` as the sandboxed command, against
# `head ... | cat > /dev/null` run bare, interleaved; wall time and peak RSS
# from GNU time (the supervisor's own RSS: the sandboxed child's is tiny).
# Cap: a copy of the policy with [limits] output_hard_limit_bytes set; the
# endless writer's wall time minus that of a writer stopping just under the
# cap is the cost of stopping it.
# Raw numbers: target/bench/output.json.
source "$(dirname "$0")/bench-lib.sh"

if [ "$SMOKE" = 1 ]; then
  BYTES=100000000 RUNS=1 CAP_RUNS=2
else
  BYTES="${BYTES:-1000000000}" RUNS="${RUNS:-5}" CAP_RUNS="${CAP_RUNS:-20}"
fi
CAP="${CAP:-1048576}"

build_release
ensure_apt /usr/bin/time time || note "peak RSS not measured"
make_root
machine_json "$OUT/output-machine.json"

# Both copies raise the timeout so a slow drain is measured, not cut off,
# and the uncapped one states its cap explicitly (0: none) whatever the
# shipped policy sets.
"$PY" "$TOOL" policy-copy "$POLICY" "$OUT/policy-uncapped.toml" \
  limits.output_hard_limit_bytes=0 limits.timeout_ms=120000 limits.max_timeout_ms=600000
"$PY" "$TOOL" policy-copy "$POLICY" "$OUT/policy-capped.toml" \
  "limits.output_hard_limit_bytes=$CAP" limits.timeout_ms=120000 limits.max_timeout_ms=600000

"$PY" "$TOOL" output --ae "$AE" --policy "$OUT/policy-uncapped.toml" \
  --capped-policy "$OUT/policy-capped.toml" --cap "$CAP" --root "$BENCH_ROOT" \
  --bytes "$BYTES" --runs "$RUNS" --cap-runs "$CAP_RUNS" --out "$OUT/output.json"
echo
echo "raw numbers: $OUT/output.json"
