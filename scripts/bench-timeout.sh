#!/usr/bin/env bash
# Timeout precision: how long after the deadline the result comes back for
# a command whose process tree ignores it (a setsid'd grandchild and a
# sleeping child), and whether anything survives.
#
#   bash scripts/bench-timeout.sh          # 20 runs
#   SMOKE=1 bash scripts/bench-timeout.sh  # 2 runs
#
# Each run tags its processes with a unique argument (sleep 60.NNNN), so
# the survivor check only ever sees this run's processes. A policy that
# refuses `setsid` gets the same process tree built by python3 (os.setsid). Each run is paired
# with a `-- /bin/true` run of the same binary as the startup baseline.
# Raw numbers: target/bench/timeout.json.
source "$(dirname "$0")/bench-lib.sh"

if [ "$SMOKE" = 1 ]; then RUNS=2; else RUNS="${RUNS:-20}"; fi
TIMEOUT_MS="${TIMEOUT_MS:-500}"

build_release
make_root
machine_json "$OUT/timeout-machine.json"
pick_true || exit 1
"$PY" "$TOOL" timeout --ae "$AE" --policy "$POLICY" --root "$BENCH_ROOT" \
  --python "$SYS_PY" --true "$TRUE_ARG" \
  --timeout-ms "$TIMEOUT_MS" --runs "$RUNS" --out "$OUT/timeout.json"
echo
echo "raw numbers: $OUT/timeout.json"
