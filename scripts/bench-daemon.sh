#!/usr/bin/env bash
# Daemon throughput and latency at 1, 8 and 32 concurrent clients.
#
#   bash scripts/bench-daemon.sh          # full run
#   SMOKE=1 bash scripts/bench-daemon.sh  # a few requests per level
#
# Each client holds one connection and sends its next request as soon as the
# previous answer arrives (closed loop), so throughput is what the daemon
# sustains, and latency includes queueing behind the daemon's admission
# limit (--max-concurrent, default twice the cores). The baseline of each
# level is the same client spawning /bin/true itself from as many threads:
# the machine's raw spawn capacity in the same run.
# Raw numbers: target/bench/daemon-*.json. DAEMON_ARGS adds serve options.
source "$(dirname "$0")/bench-lib.sh"

if [ "$SMOKE" = 1 ]; then
  REQUESTS=40
else
  REQUESTS="${REQUESTS:-4000}"
fi
LEVELS="${LEVELS:-1 8 32}"

build_release
build_client
make_root
machine_json "$OUT/daemon-machine.json"
pick_true || exit 1
start_daemon || exit 1

files=()
for c in $LEVELS; do
  note "$c clients: $REQUESTS requests through the daemon, then as bare spawns"
  "$CLIENT" load --socket "$SOCKET" --command "$TRUE_ARG" --clients "$c" --requests "$REQUESTS" \
    --out "$OUT/daemon-load-$c.json" >/dev/null || note "some calls failed at $c clients"
  "$CLIENT" spawn --bare "$TRUE_BIN" --clients "$c" --requests "$REQUESTS" \
    --out "$OUT/daemon-spawn-$c.json" >/dev/null || note "some bare spawns failed"
  files+=("$OUT/daemon-load-$c.json" "$OUT/daemon-spawn-$c.json")
done
stop_daemon

echo
echo "### daemon load ($TRUE_ARG, $REQUESTS requests per level)"
echo
"$PY" "$TOOL" client-table "$OUT/daemon.json" "${files[@]}"
echo
echo "raw numbers: $OUT/daemon-*.json"
