//! Unit tests: extractors on real tool output, the ledger.
