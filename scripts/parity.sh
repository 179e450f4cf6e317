#!/usr/bin/env bash
# Parity of real agent commands, bare vs through agent-exec: prepares the
# projects (once, cached outside the repository), runs the corpus, prints the
# table. See docs/utility.md. Needs root.
#   scripts/parity.sh                 prepare + run everything + report
#   scripts/parity.sh prepare|run|report|check ARGS...
set -euo pipefail
cd "$(dirname "$0")/.."
export PARITY_CACHE="${PARITY_CACHE:-/var/cache/agent-exec-parity}"
if [ "$#" -gt 0 ]; then
  exec python3 scripts/parity.py "$@"
fi
[ -x target/debug/agent-exec ] || cargo build --bin agent-exec
python3 scripts/parity.py prepare
python3 scripts/parity.py run --out "$PARITY_CACHE/results"
python3 scripts/parity.py report "$PARITY_CACHE/results/results.json"
