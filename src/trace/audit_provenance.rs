//! The audit's provenance report: per session, the path arguments that
//! were assumed (no earlier result showed them), and which of those were
//! written by a command that ran (possible only under `mode = "tag"`).
//! Findings to read, not invariants: they do not fail an audit.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Serialize;

use super::event::{RecordedCall, RecordedResult};
use crate::result::ProvenanceTag;

/// One assumed argument of one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AssumedArgument {
    pub call_id: String,
    pub arg: String,
    pub path: String,
    /// The command writes it.
    pub write: bool,
    /// The command ran (it was not held back or refused).
    pub ran: bool,
}

/// A session's assumed arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SessionProvenance {
    pub session: String,
    pub assumed: Vec<AssumedArgument>,
    /// Assumed arguments that were written by a run.
    pub writes_ran: usize,
}

/// Sessions with assumed arguments, by session label (`default` when a
/// call carried none).
pub(crate) fn summarize<'a>(
    calls: impl Iterator<Item = &'a RecordedCall>,
    results: impl Iterator<Item = &'a RecordedResult>,
) -> Vec<SessionProvenance> {
    let session_of: HashMap<&str, &str> = calls
        .map(|c| {
            (
                c.call_id.as_str(),
                c.session.as_deref().unwrap_or("default"),
            )
        })
        .collect();
    let mut by_session: BTreeMap<String, SessionProvenance> = BTreeMap::new();
    let mut ordered: Vec<&RecordedResult> = results.collect();
    ordered.sort_by(|a, b| (a.ts_unix_ms, &a.call_id).cmp(&(b.ts_unix_ms, &b.call_id)));
    for r in ordered {
        let ran = r.exit_code.is_some() || r.signal.is_some();
        for p in r
            .provenance
            .iter()
            .filter(|p| p.tag == ProvenanceTag::Assumed)
        {
            let session = session_of
                .get(r.call_id.as_str())
                .copied()
                .unwrap_or("default");
            let entry =
                by_session
                    .entry(session.to_string())
                    .or_insert_with(|| SessionProvenance {
                        session: session.to_string(),
                        ..Default::default()
                    });
            if p.write && ran {
                entry.writes_ran += 1;
            }
            entry.assumed.push(AssumedArgument {
                call_id: r.call_id.clone(),
                arg: p.arg.clone(),
                path: p.path.clone(),
                write: p.write,
                ran,
            });
        }
    }
    by_session.into_values().collect()
}

impl fmt::Display for SessionProvenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  provenance: session {}: {} assumed argument(s), {} written by a run",
            self.session,
            self.assumed.len(),
            self.writes_ran
        )?;
        for a in &self.assumed {
            let what = match (a.write, a.ran) {
                (true, true) => "written, ran",
                (true, false) => "written, held back",
                (false, true) => "read, ran",
                (false, false) => "read, did not run",
            };
            writeln!(f, "    [{}] {} ({what})", a.call_id, a.arg)?;
        }
        Ok(())
    }
}
