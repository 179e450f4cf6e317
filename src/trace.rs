//! Traces: JSONL evidence of every call, decision and result.
