#!/usr/bin/env bash
# Validates the workflows and the action against GitHub's schemas (as
# vendored by check-jsonschema) and audits them with zizmor, offline.
# Fails on a schema error or on any high-severity finding; lower ones are
# printed. Needs check-jsonschema and zizmor on PATH (.ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
if [ "${#workflows[@]}" -eq 0 ]; then
  echo "check-workflows: no workflow found" >&2
  exit 1
fi
check-jsonschema --builtin-schema vendor.github-workflows "${workflows[@]}"
check-jsonschema --builtin-schema vendor.github-actions action.yml
# Everything is printed; only a high-severity finding fails the check.
zizmor --offline --no-progress . || true
zizmor --offline --no-progress --min-severity high .
