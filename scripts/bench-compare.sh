#!/usr/bin/env bash
# Before and after: the one-shot CLI and the daemon of an older revision
# against the working tree, measured in one run on the same machine.
#
#   bash scripts/bench-compare.sh OLD_REV          # e.g. the commit before a refactor
#   SMOKE=1 bash scripts/bench-compare.sh OLD_REV  # each measurement a few times
#
# Each build runs with its own tree's policies/code.toml (a policy key added
# since OLD_REV would not load in the old binary). The CLI rows are one
# hyperfine group run twice, the second pass in reverse order; the daemon
# rows alternate old, new, new, old, so drift on a noisy machine shows as a
# difference between passes rather than a bias against whoever ran last.
# Raw numbers: target/bench/compare-*.json.
source "$(dirname "$0")/bench-lib.sh"

OLD_REV="${1:?usage: bench-compare.sh OLD_REV}"
if [ "$SMOKE" = 1 ]; then
  RUNS=3 WARMUP=1 SEQ=20
else
  RUNS="${RUNS:-300}" WARMUP="${WARMUP:-20}" SEQ="${SEQ:-2000}"
fi

build_release
build_client
ensure_apt hyperfine hyperfine || { note "hyperfine is required"; exit 1; }

# The old revision is exported (not checked out) into target/bench and built
# with its own target directory, so the working tree is left alone.
OLD_SRC="$OUT/compare-old-src"
OLD_SHA="$(git rev-parse --verify "$OLD_REV^{commit}")"
if [ "$(cat "$OLD_SRC/.rev" 2>/dev/null || true)" != "$OLD_SHA" ]; then
  rm -rf "$OLD_SRC"
  mkdir -p "$OLD_SRC"
  git archive "$OLD_SHA" | tar -x -C "$OLD_SRC"
  echo "$OLD_SHA" >"$OLD_SRC/.rev"
fi
note "building the release binary of $OLD_REV ($OLD_SHA)"
(cd "$OLD_SRC" && cargo build --release --quiet --bin agent-exec --target-dir "$OUT/compare-old-target")
OLD_AE="$OUT/compare-old-target/release/agent-exec"
OLD_POLICY="$OLD_SRC/policies/code.toml"
NEW_AE="$AE"
NEW_POLICY="$POLICY"

make_root
machine_json "$OUT/compare-machine.json"
pick_true "$NEW_POLICY" || exit 1

OLD_CLI="$OLD_AE --policy $OLD_POLICY --root $BENCH_ROOT -- $TRUE_ARG"
NEW_CLI="$NEW_AE --policy $NEW_POLICY --root $BENCH_ROOT -- $TRUE_ARG"
for c in "$OLD_CLI" "$NEW_CLI"; do
  # shellcheck disable=SC2086 # split as hyperfine -N splits it
  $c | grep -q '"ok":true' || { note "'$c' does not run true: $($c)"; exit 1; }
done

echo "### one-shot CLI, sandboxed \`true\`"
GROUP_PREFIX=compare run_group cli bare -- \
  "bare" "$TRUE_BIN" "CLI $OLD_REV" "$OLD_CLI" "CLI working tree" "$NEW_CLI"

# daemon_seq LABEL BINARY POLICY: one daemon, SEQ requests over one
# connection, each paired with a bare spawn from the same client.
daemon_seq() {
  local label="$1"
  AE="$2" start_daemon "$3" || { note "$label: the daemon did not start"; return 1; }
  "$CLIENT" seq --socket "$SOCKET" --requests "$SEQ" --command "$TRUE_ARG" --bare "$TRUE_BIN" \
    --out "$OUT/compare-daemon-$label.json" >/dev/null || note "$label: some calls failed"
  stop_daemon
}
daemon_seq old-1 "$OLD_AE" "$OLD_POLICY"
daemon_seq new-1 "$NEW_AE" "$NEW_POLICY"
daemon_seq new-2 "$NEW_AE" "$NEW_POLICY"
daemon_seq old-2 "$OLD_AE" "$OLD_POLICY"
for label in old-1 old-2 new-1 new-2; do
  echo
  echo "### daemon $label ($SEQ requests, one connection; old = $OLD_REV)"
  echo
  "$PY" "$TOOL" client-table "$OUT/compare-daemon-$label-table.json" "$OUT/compare-daemon-$label.json"
done
echo
echo "raw numbers: $OUT/compare-*.json"
