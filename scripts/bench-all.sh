#!/usr/bin/env bash
# Every benchmark in turn, then the targets table (met / missed).
#
#   bash scripts/bench-all.sh          # full run, about 20 minutes
#   SMOKE=1 bash scripts/bench-all.sh  # minutes: checks the scripts work
#
# One after another on purpose: on a small machine two benchmarks at once
# would each measure the other.
source "$(dirname "$0")/bench-lib.sh"

if [ "$SMOKE" = 1 ]; then
  # Criterion's test mode: every case once, nothing measured.
  cargo bench --quiet --bench decide -- --test
else
  cargo bench --quiet --bench decide
fi
bash scripts/bench-spawn.sh
bash scripts/bench-floor.sh
bash scripts/bench-daemon.sh
bash scripts/bench-output.sh
bash scripts/bench-timeout.sh
echo
echo "### targets"
echo
"$PY" "$TOOL" report "$OUT" --criterion "$BENCH_REPO/target/criterion"
