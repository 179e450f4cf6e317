//! Serving recorded results instead of running commands.
//!
//! Calls are keyed by `(tool, args_hash)`; each key keeps its own sequence,
//! so the Nth call with a key gets the Nth result recorded for it, whatever
//! the interleaving with other keys. What happens on a miss is the
//! service's call: strict answers `UNRECORDED_CALL` and runs nothing;
//! lenient may run it for real (never a mutating one unless live writes
//! are allowed) and the miss is counted here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use super::event::{Event, read_trace};
use super::{TraceError, segment_files};
use crate::result::{ErrorType, ToolResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayMode {
    Strict,
    Lenient,
}

impl std::str::FromStr for ReplayMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "strict" => Ok(ReplayMode::Strict),
            "lenient" => Ok(ReplayMode::Lenient),
            other => Err(format!(
                "replay mode must be strict or lenient, not {other:?}"
            )),
        }
    }
}

impl std::fmt::Display for ReplayMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReplayMode::Strict => "strict",
            ReplayMode::Lenient => "lenient",
        })
    }
}

// Returned by value once per call and never stored in bulk, so boxing the
// result would only add an allocation to the replay path.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayAnswer {
    Recorded(ToolResult),
    Unrecorded,
}

/// How far a key's recorded sequence was consumed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyUsage {
    pub tool: String,
    pub args_hash: String,
    pub recorded: usize,
    pub served: usize,
    /// Calls made with this key beyond the recording.
    pub extra: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplaySummary {
    pub mode: ReplayMode,
    pub trace: PathBuf,
    pub recorded_calls: usize,
    pub served: usize,
    /// Calls with no recorded result left (unknown key or sequence spent).
    pub misses: usize,
    /// Keys whose recorded calls were not all asked for again.
    pub unconsumed: Vec<KeyUsage>,
}

impl ReplaySummary {
    /// The replayed session asked exactly what was recorded, in per-key
    /// order and number.
    pub fn complete(&self) -> bool {
        self.misses == 0 && self.unconsumed.is_empty()
    }
}

impl std::fmt::Display for ReplaySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "replay ({}) of {}: {} of {} recorded calls served, {} unrecorded",
            self.mode,
            self.trace.display(),
            self.served,
            self.recorded_calls,
            self.misses
        )?;
        for k in &self.unconsumed {
            write!(
                f,
                "\n  not asked again: {} {} ({} of {} served)",
                k.tool, k.args_hash, k.served, k.recorded
            )?;
        }
        Ok(())
    }
}

struct Slot {
    results: Vec<ToolResult>,
    next: usize,
    extra: usize,
}

/// Recorded results, served in per-key order. `Send + Sync`.
pub struct Replayer {
    mode: ReplayMode,
    path: PathBuf,
    recorded_calls: usize,
    slots: Mutex<State>,
}

struct State {
    by_key: HashMap<(String, String), Slot>,
    served: usize,
    misses: usize,
}

impl Replayer {
    /// Loads a trace written with `record_full` (and its rotated segments
    /// `NAME.1.EXT`, ...). Strict mode refuses a trace recorded under a
    /// different policy or tool schema; lenient mode accepts it.
    pub fn load(
        path: &Path,
        mode: ReplayMode,
        policy_sha256: &str,
        tool_schema_sha256: &str,
    ) -> Result<Replayer, TraceError> {
        let mut header_seen = false;
        let mut calls: HashMap<String, (String, String)> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut results: HashMap<String, ToolResult> = HashMap::new();
        for file in segment_files(path) {
            let trace = read_trace(&file).map_err(|e| TraceError::Io {
                action: "read",
                path: file.clone(),
                source: e,
            })?;
            for (_, event) in trace.events {
                match event {
                    Event::Header(h) => {
                        if !h.record_full {
                            return Err(TraceError::NotRecorded {
                                path: path.to_path_buf(),
                            });
                        }
                        if mode == ReplayMode::Strict {
                            check_hash(path, "policy SHA-256", &h.policy_sha256, policy_sha256)?;
                            check_hash(
                                path,
                                "tool schema SHA-256",
                                &h.tool_schema_sha256,
                                tool_schema_sha256,
                            )?;
                        }
                        header_seen = true;
                    }
                    Event::Call(c) => {
                        if calls
                            .insert(c.call_id.clone(), (c.tool, c.args_hash))
                            .is_none()
                        {
                            order.push(c.call_id);
                        }
                    }
                    Event::Result(r) => {
                        if let Some(full) = r.result {
                            results.insert(r.call_id, full);
                        }
                    }
                    Event::Decision(_) | Event::Approval(_) | Event::Other(_) => {}
                }
            }
        }
        if !header_seen {
            return Err(TraceError::NoHeader {
                path: path.to_path_buf(),
            });
        }
        let mut by_key: HashMap<(String, String), Slot> = HashMap::new();
        let mut recorded_calls = 0;
        // Calls in the order they were asked; a call without a result (the
        // recorder died) is not replayable and is left out.
        for call_id in order {
            let (Some(key), Some(result)) = (calls.remove(&call_id), results.remove(&call_id))
            else {
                continue;
            };
            recorded_calls += 1;
            by_key
                .entry(key)
                .or_insert_with(|| Slot {
                    results: Vec::new(),
                    next: 0,
                    extra: 0,
                })
                .results
                .push(result);
        }
        Ok(Replayer {
            mode,
            path: path.to_path_buf(),
            recorded_calls,
            slots: Mutex::new(State {
                by_key,
                served: 0,
                misses: 0,
            }),
        })
    }

    pub fn mode(&self) -> ReplayMode {
        self.mode
    }

    /// The next recorded result for this key, or `Unrecorded` (counted as a
    /// miss). The result is returned as recorded (redactions included);
    /// the caller sets the live call id.
    pub fn answer(&self, tool: &str, args_hash: &str) -> ReplayAnswer {
        let mut st = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let st = &mut *st;
        let key = (tool.to_string(), args_hash.to_string());
        match st.by_key.get_mut(&key) {
            Some(slot) if slot.next < slot.results.len() => {
                let r = slot.results[slot.next].clone();
                slot.next += 1;
                st.served += 1;
                ReplayAnswer::Recorded(r)
            }
            Some(slot) => {
                slot.extra += 1;
                st.misses += 1;
                ReplayAnswer::Unrecorded
            }
            None => {
                st.misses += 1;
                ReplayAnswer::Unrecorded
            }
        }
    }

    pub fn summary(&self) -> ReplaySummary {
        let st = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut unconsumed: Vec<KeyUsage> = st
            .by_key
            .iter()
            .filter(|(_, s)| s.next < s.results.len())
            .map(|((tool, hash), s)| KeyUsage {
                tool: tool.clone(),
                args_hash: hash.clone(),
                recorded: s.results.len(),
                served: s.next,
                extra: s.extra,
            })
            .collect();
        unconsumed.sort_by(|a, b| (&a.tool, &a.args_hash).cmp(&(&b.tool, &b.args_hash)));
        ReplaySummary {
            mode: self.mode,
            trace: self.path.clone(),
            recorded_calls: self.recorded_calls,
            served: st.served,
            misses: st.misses,
            unconsumed,
        }
    }
}

/// The result strict replay gives for a call the recording does not have.
pub fn unrecorded_result(call_id: &str, tool: &str, args_hash: &str) -> ToolResult {
    ToolResult::refusal(
        call_id,
        ErrorType::UnrecordedCall,
        format!(
            "strict replay: no recorded result left for {tool} with args_hash {args_hash}; nothing was run"
        ),
    )
}

fn check_hash(
    path: &Path,
    what: &'static str,
    recorded: &str,
    current: &str,
) -> Result<(), TraceError> {
    if recorded == current {
        Ok(())
    } else {
        Err(TraceError::HashMismatch {
            path: path.to_path_buf(),
            what,
            recorded: recorded.to_string(),
            current: current.to_string(),
        })
    }
}
