#!/usr/bin/env bash
# Where a one-shot call's time goes, from the floor up, in one run.
#
#   bash scripts/bench-floor.sh          # full run (a few minutes)
#   SMOKE=1 bash scripts/bench-floor.sh  # each command a few times
#
# A ladder from a bare `true` up to the CLI, every rung run once per round
# in a shuffled order (so a slow stretch of this shared machine falls on
# all alike), with each rung's cost over the one above it paired within
# rounds: an empty Rust program (the start and exit of any Rust
# supervisor), one that spawns and waits with `std` (no sandbox), the
# sandbox crate alone (`crates/sandbox/examples/
# one_shot.rs`: the CLI's supervisor setup and one run, no policy,
# service, trace or result) with no layer, with Landlock and seccomp,
# with the namespaces too and with every layer; then `agent-exec check`
# (start, policy, decision, no run) and the CLI; `bwrap --unshare-all` for
# scale. Then the sandbox crate's own phases, timed inside the process
# (median over the runs). Raw numbers: target/bench/floor-*.json.
source "$(dirname "$0")/bench-lib.sh"

if [ "$SMOKE" = 1 ]; then
  RUNS=3 WARMUP=1
else
  RUNS="${RUNS:-400}" WARMUP="${WARMUP:-10}"
fi

build_release
note "building the sandbox crate's one-shot example"
cargo build --release --quiet -p agent-exec-sandbox --example one_shot
ONE="$BENCH_REPO/target/release/examples/one_shot"
# The start and exit of a Rust program that does nothing, built by the same
# compiler with the release profile's optimisation.
EMPTY="$OUT/floor-empty"
printf 'fn main() {}\n' >"$OUT/floor-empty.rs"
rustc -C opt-level=3 -o "$EMPTY" "$OUT/floor-empty.rs"
have_bwrap=0
ensure_apt bwrap bubblewrap && have_bwrap=1 || true
make_root
machine_json "$OUT/floor-machine.json"
pick_true || exit 1

ONE_R="$ONE --root $BENCH_ROOT"
rungs=("bare=$TRUE_BIN"
  "empty Rust program=$EMPTY"
  "Rust program, std spawn and wait=$ONE_R --std -- $TRUE_ARG"
  "sandbox crate, no layer=$ONE_R --no-namespaces --no-cgroups --no-seccomp --no-landlock -- $TRUE_ARG"
  "sandbox crate, + Landlock, seccomp=$ONE_R --no-namespaces --no-cgroups -- $TRUE_ARG"
  "sandbox crate, + namespaces=$ONE_R --no-cgroups -- $TRUE_ARG"
  "sandbox crate, + cgroups (every layer)=$ONE_R -- $TRUE_ARG"
  "agent-exec check (no run)=$AE check --policy $POLICY --root $BENCH_ROOT -- $TRUE_ARG"
  "agent-exec CLI=$AE --policy $POLICY --root $BENCH_ROOT -- $TRUE_ARG")
[ "$have_bwrap" = 1 ] &&
  rungs+=("bwrap --unshare-all=bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc --die-with-parent $TRUE_BIN")
# Each rung must run as it is timed: a sandbox the host cannot start fails
# here, with its error, instead of being timed as a fast failure.
for rung in "${rungs[@]}"; do
  # shellcheck disable=SC2086 # the command is split as the timer splits it
  ${rung#*=} >/dev/null 2>"$OUT/floor-check.err" || {
    note "'${rung%%=*}' fails on its own:"
    cat "$OUT/floor-check.err" >&2
    exit 1
  }
done
note "the ladder: $RUNS shuffled rounds"
"$PY" "$TOOL" rounds --runs "$RUNS" --warmup "$WARMUP" --out "$OUT/floor-rounds.json" "${rungs[@]}"

note "the sandbox crate's phases, $RUNS runs each"
phases=()
for layers in "no layer=--no-namespaces --no-cgroups --no-seccomp --no-landlock" "every layer="; do
  name="${layers%%=*}"
  file="$OUT/floor-phases-${name// /-}.txt"
  : >"$file"
  for _ in $(seq "$RUNS"); do
    # shellcheck disable=SC2086 # the flags are split on purpose
    $ONE_R --times ${layers#*=} -- "$TRUE_ARG" 2>>"$file" >/dev/null
  done
  phases+=("$name=$file")
done
"$PY" "$TOOL" phases --out "$OUT/floor-phases.json" "${phases[@]}"
