#!/usr/bin/env bash
# Verifies the systemd units in contrib/ with `systemd-analyze verify`, which
# works offline (no running systemd needed). verify exits 0 on many errors
# (an unparsable value is "ignored"), so any diagnostic it prints fails the
# check. ExecStart= points at the binary under test (AGENT_EXEC_BIN, default
# target/debug/agent-exec) so the executable check is real. Also prints
# systemd's offline exposure score for the service.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="$(realpath "${AGENT_EXEC_BIN:-target/debug/agent-exec}")"
[ -x "$bin" ] || { echo "check-units: $bin is not built" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp contrib/agent-exec.socket contrib/agent-exec.service "$work/"
sed -i "s|^ExecStart=/usr/local/bin/agent-exec |ExecStart=$bin |" "$work/agent-exec.service"
grep -q "^ExecStart=$bin " "$work/agent-exec.service" ||
  { echo "check-units: ExecStart= no longer starts with /usr/local/bin/agent-exec" >&2; exit 1; }

# Man pages are checked by the docs test, not here.
out="$(systemd-analyze verify --man=no "$work/agent-exec.socket" "$work/agent-exec.service" 2>&1)" || {
  echo "$out" >&2
  exit 1
}
if [ -n "$out" ]; then
  echo "check-units: systemd-analyze verify reported problems:" >&2
  echo "$out" >&2
  exit 1
fi
echo "check-units: contrib/agent-exec.socket and contrib/agent-exec.service verify clean"
if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
  systemd-analyze security --offline=yes "$work/agent-exec.service" 2>&1 | tail -1
fi
