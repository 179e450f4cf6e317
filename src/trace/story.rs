//! A trace told as a story (`agent-exec replay TRACE`): what was asked,
//! what the policy decided and why, what came back, and when.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use super::TraceError;
use super::event::{Event, read_trace};
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
    let s = Style { on: color };
    let mut steps: HashMap<String, (usize, u64)> = HashMap::new();
    let (mut n_calls, mut n_ok, mut n_err, mut n_refused) = (0usize, 0usize, 0usize, 0usize);
    let w = |out: &mut dyn Write, text: String| writeln!(out, "{text}").map_err(TraceError::Output);
    for file in super::segment_files(path) {
        let trace = read_trace(&file).map_err(|e| TraceError::Io {
            action: "read",
            path: file.clone(),
            source: e,
        })?;
        let mut problems = trace.problems.iter().peekable();
        for (line, event) in trace.events {
            while let Some(p) = problems.next_if(|p| p.line < line) {
                w(
                    out,
                    s.yellow(&format!(
                        "  ! line {}: {} line skipped: {}",
                        p.line, p.kind, p.message
                    )),
                )?;
            }
            match event {
                Event::Header(h) => {
                    let title = if h.segment > 0 {
                        format!("Trace {} (segment {})", file.display(), h.segment)
                    } else {
                        format!("Trace {}", file.display())
                    };
                    w(out, s.bold(&title))?;
                    w(
                        out,
                        format!(
                            "  started {} by agent-exec {} on kernel {} (Landlock ABI {})",
                            h.start_time, h.agent_exec_version, h.host_kernel, h.landlock_abi
                        ),
                    )?;
                    let short = h.policy_sha256.get(..12).unwrap_or(&h.policy_sha256);
                    w(
                        out,
                        format!(
                            "  policy {} (sha256 {short}…), {}",
                            h.policy_name,
                            if h.record_full {
                                "full recording (replayable)"
                            } else {
                                "hashes and previews only"
                            }
                        ),
                    )?;
                }
                Event::Call(c) => {
                    n_calls += 1;
                    steps.insert(c.call_id.clone(), (n_calls, c.ts_unix_ms));
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
                    w(out, String::new())?;
                    w(
                        out,
                        format!(
                            "{} {} {}{who} asked {}: {}{}",
                            s.dim(&clock(c.ts_unix_ms)),
                            s.bold(&format!("#{n_calls}")),
                            s.dim(&c.call_id),
                            c.tool,
                            c.args_preview,
                            s.dim(&deadline)
                        ),
                    )?;
                }
                Event::Decision(d) => {
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
                    w(
                        out,
                        format!(
                            "   {}  {painted} by rule {} (risk {risk}{approval}): {}",
                            step_label(&steps, &d.call_id),
                            d.rule,
                            d.reason
                        ),
                    )?;
                }
                Event::Result(r) => {
                    let elapsed = steps
                        .get(&r.call_id)
                        .filter(|(_, t)| *t > 0 && r.ts_unix_ms >= *t)
                        .map(|(_, t)| format!(", answered after {} ms", r.ts_unix_ms - t))
                        .unwrap_or_default();
                    let verdict = if r.status == "ok" {
                        n_ok += 1;
                        s.green("ok")
                    } else {
                        n_err += 1;
                        if matches!(
                            r.error_type.as_deref(),
                            Some("PERMISSION_DENIED" | "APPROVAL_REQUIRED")
                        ) {
                            n_refused += 1;
                        }
                        s.red(r.error_type.as_deref().unwrap_or("error"))
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
                    w(
                        out,
                        format!(
                            "   {}  {verdict}: {exit}, ran {} ms, {} B stdout, {} B stderr{trunc}{}",
                            step_label(&steps, &r.call_id),
                            r.duration_ms,
                            r.stdout_bytes,
                            r.stderr_bytes,
                            s.dim(&elapsed)
                        ),
                    )?;
                    if !r.message.is_empty() && r.status != "ok" {
                        w(out, format!("        {}", r.message))?;
                    }
                }
                Event::Other(kind) => w(out, s.dim(&format!("   (line {line}: {kind} event)")))?,
            }
        }
        for p in problems {
            w(
                out,
                s.yellow(&format!(
                    "  ! line {}: {} line skipped: {}",
                    p.line, p.kind, p.message
                )),
            )?;
        }
    }
    w(out, String::new())?;
    w(
        out,
        s.bold(&format!(
            "{n_calls} call(s): {n_ok} ok, {n_err} failed ({n_refused} refused by policy)"
        )),
    )?;
    Ok(())
}

fn step_label(steps: &HashMap<String, (usize, u64)>, call_id: &str) -> String {
    match steps.get(call_id) {
        Some((n, _)) => format!("#{n}"),
        None => format!("?{call_id}"),
    }
}
