#!/usr/bin/env bash
# Spawn cost of agent-exec next to the other sandboxes, in one run.
#
#   bash scripts/bench-spawn.sh          # full run (several minutes)
#   SMOKE=1 bash scripts/bench-spawn.sh  # each command a few times
#
# Two hyperfine groups (`/bin/true`, `python3 -c pass`), each run twice, the
# second pass in reverse order, so drift of a noisy machine shows up as a
# difference between passes instead of a bias against whoever ran last.
# Between them, calls that come alone (a second of quiet before each).
# Then the daemon: N requests over one connection, each followed by a bare
# spawn of the same program from the same client, for the per-run cost.
# The `true` group has the CLI as a thin client of that daemon
# (`--daemon`), next to the CLI running the call itself.
# Raw numbers: target/bench/spawn-*.json. Chart: docs/bench-spawn.png.
source "$(dirname "$0")/bench-lib.sh"

if [ "$SMOKE" = 1 ]; then
  RUNS=3 WARMUP=1 SEQ=20 LONE=1 LONE_IDLE=0.1
else
  RUNS="${RUNS:-300}" WARMUP="${WARMUP:-20}" SEQ="${SEQ:-3000}"
  LONE="${LONE:-10}" LONE_IDLE="${LONE_IDLE:-1}"
fi

build_release
build_static
build_client
ensure_apt hyperfine hyperfine || { note "hyperfine is required"; exit 1; }
have_bwrap=0 have_firejail=0 have_nsjail=0
ensure_apt bwrap bubblewrap && have_bwrap=1 || true
ensure_apt firejail firejail && have_firejail=1 || true
ensure_nsjail && have_nsjail=1 || true
make_root
machine_json "$OUT/spawn-machine.json"
pick_true || exit 1

start_daemon || { note "daemon rows skipped"; DAEMON_PID=""; }

AEC="$AE --policy $POLICY --root $BENCH_ROOT"
BWRAP="bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --die-with-parent"
FIREJAIL="firejail --quiet --noprofile --net=none"
# nsjail's defaults: every namespace, a fresh mount tree (here a read-only
# view of /), rlimits; the child runs as nobody like agent-exec's.
NSJ="$NSJAIL -Mo --really_quiet --user 65534 --group 65534 --chroot /"

args=(-- "bare" "$TRUE_BIN" "agent-exec CLI" "$AEC -- $TRUE_ARG")
# Breakdown row: the same binary up to the decision (startup, policy load,
# decide), running nothing, so the CLI row splits into "before the sandbox"
# and "sandbox, spawn, result".
args+=("agent-exec check (no run)" "$AE check --policy $POLICY --root $BENCH_ROOT -- $TRUE_ARG")
[ -n "$AE_STATIC" ] &&
  args+=("agent-exec CLI (static-pie build)" "$AE_STATIC --policy $POLICY --root $BENCH_ROOT -- $TRUE_ARG")
[ -n "$DAEMON_PID" ] &&
  args+=("agent-exec CLI --daemon (thin client)" "$AEC --daemon $SOCKET -- $TRUE_ARG") &&
  args+=("agent-exec-client --daemon (small thin client)" "$AE_CLIENT --policy $POLICY --root $BENCH_ROOT --daemon $SOCKET -- $TRUE_ARG") &&
  { [ -z "$AE_STATIC" ] ||
    args+=("agent-exec-client --daemon (static-pie build)" "${AE_STATIC}-client --policy $POLICY --root $BENCH_ROOT --daemon $SOCKET -- $TRUE_ARG"); } &&
  args+=("agent-exec daemon (client process per run)" "$CLIENT once --socket $SOCKET --command $TRUE_ARG")
[ "$have_bwrap" = 1 ] && args+=("bwrap --unshare-all" "$BWRAP $TRUE_BIN")
[ "$have_nsjail" = 1 ] && args+=("nsjail" "$NSJ -- $TRUE_BIN")
[ "$have_firejail" = 1 ] && args+=("firejail --net=none" "$FIREJAIL $TRUE_BIN")
run_group true bare "${args[@]}"

# Calls that come alone: after a second of quiet each, as an agent's
# single call comes (the cgroup v1 join of a lone call waits for an RCU
# grace period that back-to-back calls share).
note "lone calls: $LONE of each, ${LONE_IDLE}s of quiet before each"
lone=("bare=$TRUE_BIN" "agent-exec CLI=$AEC -- $TRUE_ARG")
[ -n "$AE_STATIC" ] && lone+=("agent-exec CLI (static-pie build)=$AE_STATIC --policy $POLICY --root $BENCH_ROOT -- $TRUE_ARG")
[ -n "$DAEMON_PID" ] && lone+=("agent-exec CLI --daemon (thin client)=$AEC --daemon $SOCKET -- $TRUE_ARG") &&
  lone+=("agent-exec-client --daemon (small thin client)=$AE_CLIENT --policy $POLICY --root $BENCH_ROOT --daemon $SOCKET -- $TRUE_ARG")
"$PY" "$TOOL" lone --runs "$LONE" --idle "$LONE_IDLE" --out "$OUT/spawn-lone.json" "${lone[@]}"

args=(-- "bare" "$SYS_PY -c pass" "agent-exec CLI" "$AEC -- $SYS_PY -c pass")
[ "$have_bwrap" = 1 ] && args+=("bwrap --unshare-all" "$BWRAP $SYS_PY -c pass")
[ "$have_nsjail" = 1 ] && args+=("nsjail" "$NSJ -- $SYS_PY -c pass")
[ "$have_firejail" = 1 ] && args+=("firejail --net=none" "$FIREJAIL $SYS_PY -c pass")
run_group python bare "${args[@]}"

if [ -n "$DAEMON_PID" ]; then
  note "daemon: $SEQ sequential requests, each paired with a bare spawn"
  "$CLIENT" seq --socket "$SOCKET" --requests "$SEQ" --command "$TRUE_ARG" --bare "$TRUE_BIN" \
    --out "$OUT/spawn-daemon-seq.json" >/dev/null || note "some daemon calls failed (see above)"
  echo
  echo "### daemon per-run cost ($SEQ requests, one connection)"
  echo
  "$PY" "$TOOL" client-table "$OUT/spawn-daemon.json" "$OUT/spawn-daemon-seq.json"
fi
stop_daemon

chart_out="$BENCH_REPO/docs/bench-spawn.png"
[ "$SMOKE" = 1 ] && chart_out="$OUT/bench-spawn.png"
"$PY" "$BENCH_REPO/scripts/bench_chart.py" --out "$chart_out" \
  --machine "$OUT/spawn-machine.json" "$OUT/spawn-true.json" "$OUT/spawn-python.json" ||
  note "chart not drawn"
echo
echo "raw numbers: $OUT/spawn-*.json; chart: $chart_out"
echo
echo "### targets (issue ratios from this run; rows of other scripts say 'not measured')"
echo
"$PY" "$TOOL" report "$OUT"
