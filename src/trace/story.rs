//! A trace told as a story (`agent-exec replay TRACE`): what was asked,
//! what the policy decided and why, what came back, and when.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use super::TraceError;
use super::event::{
    Event, LineProblem, RecordedCall, RecordedDecision, RecordedHeader, RecordedResult, read_trace,
};
use super::time::clock;
use crate::policy::Verdict;

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    fn bold(&self, t: &str) -> String {
        self.paint("1", t)
    }
    fn dim(&self, t: &str) -> String {
        self.paint("2", t)
    }
    fn green(&self, t: &str) -> String {
        self.paint("32", t)
    }
    fn red(&self, t: &str) -> String {
        self.paint("31", t)
    }
    fn yellow(&self, t: &str) -> String {
        self.paint("33", t)
    }
}

/// Writes the story of the trace at `path` (and its rotated segments).
/// `color` adds ANSI colours; the CLI passes true only for a terminal.
pub fn story(path: &Path, out: &mut dyn Write, color: bool) -> Result<(), TraceError> {
    let mut teller = Teller {
        out,
        s: Style { on: color },
        steps: HashMap::new(),
        calls: 0,
        ok: 0,
        failed: 0,
        refused: 0,
    };
    for file in super::segment_files(path) {
        let trace = read_trace(&file).map_err(|e| TraceError::Io {
            action: "read",
            path: file.clone(),
            source: e,
        })?;
        // Damaged lines are told where they were, between the events.
        let mut problems = trace.problems.iter().peekable();
        for (line, event) in trace.events {
            while let Some(p) = problems.next_if(|p| p.line < line) {
                teller.problem(p)?;
            }
            match event {
                Event::Header(h) => teller.header(&file, &h)?,
                Event::Call(c) => teller.call(&c)?,
                Event::Decision(d) => teller.decision(&d)?,
                Event::Result(r) => teller.result(&r)?,
                Event::Approval(a) => {
                    // Debug quoting: ids and details read from a file are
                    // shown with control characters escaped.
                    let text = format!(
                        "   approval {:?} {:?} by uid {}{}",
                        a.approval_id,
                        a.action,
                        a.uid,
                        a.detail.map(|d| format!(" ({d:?})")).unwrap_or_default()
                    );
                    teller.line(teller.s.dim(&text))?;
                }
                Event::Other(kind) => {
                    let text = teller.s.dim(&format!("   (line {line}: {kind} event)"));
                    teller.line(text)?;
                }
            }
        }
        for p in problems {
            teller.problem(p)?;
        }
    }
    teller.summary()
}

/// The story so far: numbered steps by call id, and the tallies.
struct Teller<'o> {
    out: &'o mut dyn Write,
    s: Style,
    /// Call id → (step number, when it was asked).
    steps: HashMap<String, (usize, u64)>,
    calls: usize,
    ok: usize,
    failed: usize,
    refused: usize,
}

impl Teller<'_> {
    fn line(&mut self, text: String) -> Result<(), TraceError> {
        writeln!(self.out, "{text}").map_err(TraceError::Output)
    }

    fn problem(&mut self, p: &LineProblem) -> Result<(), TraceError> {
        let text = self.s.yellow(&format!(
            "  ! line {}: {} line skipped: {}",
            p.line, p.kind, p.message
        ));
        self.line(text)
    }

    fn header(&mut self, file: &Path, h: &RecordedHeader) -> Result<(), TraceError> {
        let title = if h.segment > 0 {
            format!("Trace {} (segment {})", file.display(), h.segment)
        } else {
            format!("Trace {}", file.display())
        };
        let title = self.s.bold(&title);
        self.line(title)?;
        self.line(format!(
            "  started {} by agent-exec {} on kernel {} (Landlock ABI {})",
            h.start_time, h.agent_exec_version, h.host_kernel, h.landlock_abi
        ))?;
        let short = h.policy_sha256.get(..12).unwrap_or(&h.policy_sha256);
        self.line(format!(
            "  policy {} (sha256 {short}…), {}",
            h.policy_name,
            if h.record_full {
                "full recording (replayable)"
            } else {
                "hashes and previews only"
            }
        ))
    }

    fn call(&mut self, c: &RecordedCall) -> Result<(), TraceError> {
        self.calls += 1;
        let n = self.calls;
        self.steps.insert(c.call_id.clone(), (n, c.ts_unix_ms));
        let who = c
            .session
            .as_deref()
            .map(|x| format!(" in session {x}"))
            .unwrap_or_default();
        let deadline = if c.deadline_ms > 0 {
            format!(", deadline {} ms", c.deadline_ms)
        } else {
            String::new()
        };
        let s = &self.s;
        let text = format!(
            "{} {} {}{who} asked {}: {}{}",
            s.dim(&clock(c.ts_unix_ms)),
            s.bold(&format!("#{n}")),
            s.dim(&c.call_id),
            c.tool,
            c.args_preview,
            s.dim(&deadline)
        );
        self.line(String::new())?;
        self.line(text)
    }

    fn decision(&mut self, d: &RecordedDecision) -> Result<(), TraceError> {
        let s = &self.s;
        let painted = match d.decision {
            Verdict::Allow => s.green("allowed"),
            Verdict::Deny => s.red("denied"),
            Verdict::RequireApproval => s.yellow("needs approval"),
        };
        let risk = d
            .risk_level
            .map(|r| format!("{r:?}").to_lowercase())
            .unwrap_or_else(|| "?".into());
        let approval = match (d.approval_asked, d.approval_given) {
            (true, Some(true)) => ", a human approved",
            (true, Some(false)) => ", a human refused",
            (true, None) => ", approval asked, no answer",
            (false, _) => "",
        };
        let text = format!(
            "   {}  {painted} by rule {} (risk {risk}{approval}): {}",
            step_label(&self.steps, &d.call_id),
            d.rule,
            d.reason
        );
        self.line(text)
    }

    fn result(&mut self, r: &RecordedResult) -> Result<(), TraceError> {
        let elapsed = self
            .steps
            .get(&r.call_id)
            .filter(|(_, t)| *t > 0 && r.ts_unix_ms >= *t)
            .map(|(_, t)| format!(", answered after {} ms", r.ts_unix_ms - t))
            .unwrap_or_default();
        let verdict = if r.status == "ok" {
            self.ok += 1;
            self.s.green("ok")
        } else {
            self.failed += 1;
            if matches!(
                r.error_type.as_deref(),
                Some("PERMISSION_DENIED" | "APPROVAL_REQUIRED")
            ) {
                self.refused += 1;
            }
            self.s.red(r.error_type.as_deref().unwrap_or("error"))
        };
        let exit = match (r.exit_code, r.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => "not run".to_string(),
        };
        let trunc = if r.stdout_truncated || r.stderr_truncated {
            " (truncated)"
        } else {
            ""
        };
        let text = format!(
            "   {}  {verdict}: {exit}, ran {} ms, {} B stdout, {} B stderr{trunc}{}",
            step_label(&self.steps, &r.call_id),
            r.duration_ms,
            r.stdout_bytes,
            r.stderr_bytes,
            self.s.dim(&elapsed)
        );
        self.line(text)?;
        if !r.message.is_empty() && r.status != "ok" {
            self.line(format!("        {}", r.message))?;
        }
        Ok(())
    }

    fn summary(&mut self) -> Result<(), TraceError> {
        self.line(String::new())?;
        let text = self.s.bold(&format!(
            "{} call(s): {} ok, {} failed ({} refused by policy)",
            self.calls, self.ok, self.failed, self.refused
        ));
        self.line(text)
    }
}

fn step_label(steps: &HashMap<String, (usize, u64)>, call_id: &str) -> String {
    match steps.get(call_id) {
        Some((n, _)) => format!("#{n}"),
        None => format!("?{call_id}"),
    }
}
