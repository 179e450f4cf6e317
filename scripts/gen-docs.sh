#!/usr/bin/env bash
# Regenerates the man pages (docs/man/) and shell completions (completions/)
# from the CLI definition. Commit the result; tests/generated_docs.rs fails
# when they are out of date.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --features gen-docs --bin gen-docs
