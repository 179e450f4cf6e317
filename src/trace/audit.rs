//! Invariant checks over one or more traces (`agent-exec audit`).
//!
//! All files given are audited together: a call and its result are matched
//! by call id across files, so a rotated trace or a daemon's per-session
//! files can be checked as one. Damaged lines are findings, never a crash.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::approval::{ApprovalAction, RecordedApproval};
use super::event::{Event, RecordedCall, RecordedDecision, RecordedResult, read_trace};
use crate::policy::Verdict;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditOptions {
    /// Identical calls (same run, tool and args_hash) at or above this
    /// count are a retry storm.
    pub retry_threshold: usize,
    /// How late a result may come after its call's deadline before it is a
    /// miss: killing on timeout takes a grace period plus a pipe drain.
    pub deadline_slack_ms: u64,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            retry_threshold: 3,
            deadline_slack_ms: 1_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    UnreadableFile,
    TruncatedLine,
    InvalidLine,
    MissingHeader,
    DuplicateCallId,
    OrphanCall,
    UnmatchedResult,
    DuplicateResult,
    UnmatchedDecision,
    RetryStorm,
    DeadlineMiss,
    RefusalWithoutReason,
    RefusedButExecuted,
    /// One approval let more than one call run.
    ApprovalUsedTwice,
    /// A call ran under an approval a human rejected, or a call refused
    /// for its approval has the result of a run.
    RefusedApprovalRan,
    /// An approval decided or used that no call in the traces asked for,
    /// or used by a call the traces do not have.
    ApprovalWithoutCall,
}

impl IssueKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IssueKind::UnreadableFile => "unreadable_file",
            IssueKind::TruncatedLine => "truncated_line",
            IssueKind::InvalidLine => "invalid_line",
            IssueKind::MissingHeader => "missing_header",
            IssueKind::DuplicateCallId => "duplicate_call_id",
            IssueKind::OrphanCall => "orphan_call",
            IssueKind::UnmatchedResult => "unmatched_result",
            IssueKind::DuplicateResult => "duplicate_result",
            IssueKind::UnmatchedDecision => "unmatched_decision",
            IssueKind::RetryStorm => "retry_storm",
            IssueKind::DeadlineMiss => "deadline_miss",
            IssueKind::RefusalWithoutReason => "refusal_without_reason",
            IssueKind::RefusedButExecuted => "refused_but_executed",
            IssueKind::ApprovalUsedTwice => "approval_used_twice",
            IssueKind::RefusedApprovalRan => "refused_approval_ran",
            IssueKind::ApprovalWithoutCall => "approval_without_call",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issue {
    pub kind: IssueKind,
    pub file: PathBuf,
    /// 1-based line the finding is about, when there is one.
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AuditReport {
    pub files: Vec<PathBuf>,
    pub events: usize,
    pub calls: usize,
    pub decisions: usize,
    pub results: usize,
    pub refused: usize,
    pub counts: BTreeMap<IssueKind, usize>,
    pub issues: Vec<Issue>,
    pub ok: bool,
    /// Assumed path arguments per session (argument provenance); they do
    /// not fail the audit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<super::SessionProvenance>,
}

impl AuditReport {
    /// True when any invariant failed (the CLI exits 1).
    pub fn failed(&self) -> bool {
        !self.issues.is_empty()
    }
}

impl fmt::Display for AuditReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "audit: {} file(s), {} events, {} calls, {} results, {} refused: {}",
            self.files.len(),
            self.events,
            self.calls,
            self.results,
            self.refused,
            if self.failed() {
                format!("FAIL ({} issue(s))", self.issues.len())
            } else {
                "OK".to_string()
            }
        )?;
        for i in &self.issues {
            write!(f, "  {}", i.file.display())?;
            if let Some(line) = i.line {
                write!(f, ":{line}")?;
            }
            write!(f, ": {}", i.kind.as_str())?;
            if let Some(id) = &i.call_id {
                write!(f, " [{id}]")?;
            }
            writeln!(f, ": {}", i.message)?;
        }
        for p in &self.provenance {
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// (scope text, file index or MAX for a session, tool, args_hash).
type StormKey<'a> = (String, usize, &'a str, &'a str);
/// (calls, file and line of the first).
type StormCount = (usize, usize, usize);

struct Located<T> {
    file: usize,
    line: usize,
    ev: T,
}

/// Audits the traces at `paths` together.
pub fn audit(paths: &[PathBuf], opts: &AuditOptions) -> AuditReport {
    let mut report = AuditReport {
        files: paths.to_vec(),
        ..Default::default()
    };
    let mut index = Index::default();
    for (fi, path) in paths.iter().enumerate() {
        index.read_file(&mut report, fi, path);
    }
    report.calls = index.calls.len();
    index.report_extra_events(&mut report, paths);
    let storms = index.check_calls(&mut report, paths, opts);
    index.report_unmatched(&mut report, paths);
    index.check_approvals(&mut report, paths);
    report_storms(&mut report, storms, paths, opts);
    report.provenance = super::audit_provenance::summarize(
        index.calls.iter().map(|c| &c.ev),
        index
            .results
            .values()
            .chain(index.extra_results.iter())
            .map(|r| &*r.ev),
    );
    report
        .issues
        .sort_by(|a, b| (&a.file, a.line, a.kind).cmp(&(&b.file, b.line, b.kind)));
    report.ok = !report.failed();
    report
}

/// Every event of every file, by call id where the invariants need it.
#[derive(Default)]
struct Index {
    calls: Vec<Located<RecordedCall>>,
    decisions: HashMap<String, Located<RecordedDecision>>,
    results: HashMap<String, Located<Box<RecordedResult>>>,
    /// Decisions and results beyond the first for a call id.
    extra_decisions: Vec<Located<RecordedDecision>>,
    extra_results: Vec<Located<Box<RecordedResult>>>,
    approvals: Vec<Located<RecordedApproval>>,
}

impl Index {
    fn read_file(&mut self, report: &mut AuditReport, fi: usize, path: &Path) {
        let trace = match read_trace(path) {
            Ok(t) => t,
            Err(e) => {
                push(
                    report,
                    IssueKind::UnreadableFile,
                    path,
                    None,
                    None,
                    format!("cannot read: {e}"),
                );
                return;
            }
        };
        for p in &trace.problems {
            let kind = if p.kind == "truncated" {
                IssueKind::TruncatedLine
            } else {
                IssueKind::InvalidLine
            };
            push(report, kind, path, Some(p.line), None, p.message.clone());
        }
        check_header(report, path, &trace);
        for (line, event) in trace.events {
            report.events += 1;
            match event {
                Event::Header(_) | Event::Other(_) => {}
                Event::Approval(ev) => self.approvals.push(Located { file: fi, line, ev }),
                Event::Call(ev) => self.calls.push(Located { file: fi, line, ev }),
                Event::Decision(ev) => {
                    report.decisions += 1;
                    let located = Located { file: fi, line, ev };
                    if self.decisions.contains_key(&located.ev.call_id) {
                        self.extra_decisions.push(located);
                    } else {
                        self.decisions.insert(located.ev.call_id.clone(), located);
                    }
                }
                Event::Result(ev) => {
                    report.results += 1;
                    let located = Located { file: fi, line, ev };
                    if self.results.contains_key(&located.ev.call_id) {
                        self.extra_results.push(located);
                    } else {
                        self.results.insert(located.ev.call_id.clone(), located);
                    }
                }
            }
        }
    }

    /// A second result or decision for one call.
    fn report_extra_events(&self, report: &mut AuditReport, paths: &[PathBuf]) {
        for d in &self.extra_results {
            push(
                report,
                IssueKind::DuplicateResult,
                &paths[d.file],
                Some(d.line),
                Some(&d.ev.call_id),
                "a second tool_result for the same call (exactly one is allowed)".into(),
            );
        }
        for d in &self.extra_decisions {
            push(
                report,
                IssueKind::UnmatchedDecision,
                &paths[d.file],
                Some(d.line),
                Some(&d.ev.call_id),
                "a second policy_decision for the same call".into(),
            );
        }
    }

    /// Each call: a unique id, exactly one result in time, a reason when
    /// refused and no run; counts identical calls for the storm check.
    fn check_calls<'a>(
        &'a self,
        report: &mut AuditReport,
        paths: &[PathBuf],
        opts: &AuditOptions,
    ) -> HashMap<StormKey<'a>, StormCount> {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut storms: HashMap<StormKey, StormCount> = HashMap::new();
        for (idx, c) in self.calls.iter().enumerate() {
            let path = &paths[c.file];
            let id = c.ev.call_id.as_str();
            if let Some(&first) = seen.get(id) {
                push(
                    report,
                    IssueKind::DuplicateCallId,
                    path,
                    Some(c.line),
                    Some(id),
                    format!("call id already used on line {}", self.calls[first].line),
                );
                continue;
            }
            seen.insert(id, idx);
            storms.entry(storm_key(c)).or_insert((0, c.file, c.line)).0 += 1;
            let decision = self.decisions.get(id);
            let Some(result) = self.results.get(id) else {
                push(
                    report,
                    IssueKind::OrphanCall,
                    path,
                    Some(c.line),
                    Some(id),
                    format!(
                        "{} call has no tool_result (the writer died or the call never finished)",
                        c.ev.tool
                    ),
                );
                check_refusal(report, path, c, decision, None);
                continue;
            };
            check_deadline(report, &paths[result.file], c, result, opts);
            check_refusal(report, path, c, decision, Some(result));
        }
        storms
    }

    /// Results and decisions whose call is not in any of the files.
    fn report_unmatched(&self, report: &mut AuditReport, paths: &[PathBuf]) {
        let matched: std::collections::HashSet<&str> =
            self.calls.iter().map(|c| c.ev.call_id.as_str()).collect();
        let mut orphans: Vec<&Located<Box<RecordedResult>>> = self
            .results
            .values()
            .filter(|r| !matched.contains(r.ev.call_id.as_str()))
            .collect();
        orphans.sort_by_key(|r| (r.file, r.line));
        for r in orphans {
            push(
                report,
                IssueKind::UnmatchedResult,
                &paths[r.file],
                Some(r.line),
                Some(&r.ev.call_id),
                "tool_result without a tool_call".into(),
            );
        }
        let mut lonely: Vec<&Located<RecordedDecision>> = self
            .decisions
            .values()
            .filter(|d| !matched.contains(d.ev.call_id.as_str()))
            .collect();
        lonely.sort_by_key(|d| (d.file, d.line));
        for d in lonely {
            push(
                report,
                IssueKind::UnmatchedDecision,
                &paths[d.file],
                Some(d.line),
                Some(&d.ev.call_id),
                "policy_decision without a tool_call".into(),
            );
        }
    }
}

impl Index {
    /// Approvals across all files, by id: used at most once, never after
    /// a rejection, and only by calls that asked for one.
    fn check_approvals(&self, report: &mut AuditReport, paths: &[PathBuf]) {
        let calls: std::collections::HashSet<&str> =
            self.calls.iter().map(|c| c.ev.call_id.as_str()).collect();
        let mut by_id: BTreeMap<&str, Vec<&Located<RecordedApproval>>> = BTreeMap::new();
        for a in &self.approvals {
            by_id.entry(a.ev.approval_id.as_str()).or_default().push(a);
        }
        for (id, steps) in by_id {
            let has = |action| steps.iter().any(|a| a.ev.action == action);
            let requested = has(ApprovalAction::Requested);
            let rejected = has(ApprovalAction::Rejected);
            let mut uses = 0;
            for a in &steps {
                let at = (&paths[a.file], Some(a.line), a.ev.call_id.as_deref());
                let issue = |report: &mut AuditReport, kind, message: String| {
                    push(report, kind, at.0, at.1, at.2, message);
                };
                match a.ev.action {
                    ApprovalAction::Used => {
                        uses += 1;
                        if uses == 2 {
                            issue(
                                report,
                                IssueKind::ApprovalUsedTwice,
                                format!(
                                    "approval {id} let a second call run (an approval runs its command once)"
                                ),
                            );
                        }
                        if rejected {
                            issue(
                                report,
                                IssueKind::RefusedApprovalRan,
                                format!("a call ran under approval {id}, which a human rejected"),
                            );
                        }
                        if a.ev.call_id.as_deref().is_none_or(|c| !calls.contains(c)) {
                            issue(
                                report,
                                IssueKind::ApprovalWithoutCall,
                                format!("approval {id} was used by a call that is in no trace"),
                            );
                        }
                    }
                    ApprovalAction::Refused => {
                        let ran =
                            a.ev.call_id
                                .as_deref()
                                .and_then(|c| self.results.get(c))
                                .is_some_and(|r| r.ev.status == "ok" || r.ev.exit_code.is_some());
                        if ran {
                            issue(
                                report,
                                IssueKind::RefusedApprovalRan,
                                format!("a call refused for approval {id} has the result of a run"),
                            );
                        }
                    }
                    ApprovalAction::Approved
                    | ApprovalAction::Rejected
                    | ApprovalAction::Amended
                        if !requested =>
                    {
                        issue(
                            report,
                            IssueKind::ApprovalWithoutCall,
                            format!(
                                "approval {id} was {} by uid {} but no call in the traces asked for it",
                                format!("{:?}", a.ev.action).to_lowercase(),
                                a.ev.uid
                            ),
                        );
                    }
                    _ => {}
                }
            }
        }
    }
}

/// A trace starts with its header; an empty file is a finding too, unless
/// its lines were all reported as damaged already.
fn check_header(report: &mut AuditReport, path: &Path, trace: &super::event::TraceFile) {
    match trace.events.first() {
        Some((_, Event::Header(_))) => {}
        Some((line, _)) => push(
            report,
            IssueKind::MissingHeader,
            path,
            Some(*line),
            None,
            "the first event is not a trace_header".into(),
        ),
        None if trace.problems.is_empty() => push(
            report,
            IssueKind::MissingHeader,
            path,
            None,
            None,
            "empty trace".into(),
        ),
        None => {}
    }
}

/// Which calls count as the same retry: a session is one agent run even
/// across files (daemon); without one, a trace file is: the CLI appends
/// one invocation per command to the same file, each with its own writer
/// run id.
fn storm_key(c: &Located<RecordedCall>) -> StormKey<'_> {
    let (scope, scope_file) = match c.ev.session.as_deref() {
        Some(s) => (format!("session {s}"), usize::MAX),
        None => ("this trace".to_string(), c.file),
    };
    (
        scope,
        scope_file,
        c.ev.tool.as_str(),
        c.ev.args_hash.as_str(),
    )
}

fn check_deadline(
    report: &mut AuditReport,
    result_path: &Path,
    c: &Located<RecordedCall>,
    result: &Located<Box<RecordedResult>>,
    opts: &AuditOptions,
) {
    if c.ev.deadline_ms == 0 || c.ev.ts_unix_ms == 0 || result.ev.ts_unix_ms == 0 {
        return;
    }
    let late_by = result
        .ev
        .ts_unix_ms
        .saturating_sub(c.ev.ts_unix_ms + c.ev.deadline_ms);
    if late_by > opts.deadline_slack_ms {
        push(
            report,
            IssueKind::DeadlineMiss,
            result_path,
            Some(result.line),
            Some(&c.ev.call_id),
            format!(
                "result came {late_by} ms after the {} ms deadline",
                c.ev.deadline_ms
            ),
        );
    }
}

fn report_storms(
    report: &mut AuditReport,
    storms: HashMap<StormKey<'_>, StormCount>,
    paths: &[PathBuf],
    opts: &AuditOptions,
) {
    let threshold = opts.retry_threshold.max(2);
    let mut storm_list: Vec<_> = storms
        .into_iter()
        .filter(|(_, (n, _, _))| *n >= threshold)
        .collect();
    storm_list.sort_by_key(|(_, (_, f, l))| (*f, *l));
    for ((scope, _, tool, hash), (n, file, line)) in storm_list {
        let short = hash.get(..12).unwrap_or(hash);
        push(
            report,
            IssueKind::RetryStorm,
            &paths[file],
            Some(line),
            None,
            format!(
                "{n} identical {tool} calls (args_hash {short}…) in {scope}; threshold {threshold}"
            ),
        );
    }
}

fn check_refusal(
    report: &mut AuditReport,
    path: &Path,
    call: &Located<RecordedCall>,
    decision: Option<&Located<RecordedDecision>>,
    result: Option<&Located<Box<RecordedResult>>>,
) {
    let by_decision = decision.is_some_and(|d| match d.ev.decision {
        Verdict::Deny => true,
        Verdict::RequireApproval => d.ev.approval_given != Some(true),
        Verdict::Allow => false,
    });
    let by_result = result.is_some_and(|r| {
        matches!(
            r.ev.error_type.as_deref(),
            Some(
                "PERMISSION_DENIED"
                    | "APPROVAL_REQUIRED"
                    | "APPROVAL_PENDING"
                    | "APPROVAL_REJECTED"
                    | "APPROVAL_EXPIRED"
                    | "APPROVAL_USED"
                    | "APPROVAL_MISMATCH"
            )
        )
    });
    if !(by_decision || by_result) {
        return;
    }
    report.refused += 1;
    let id = call.ev.call_id.as_str();
    match decision {
        Some(d) if !d.ev.reason.trim().is_empty() => {}
        Some(d) => push(
            report,
            IssueKind::RefusalWithoutReason,
            path,
            Some(d.line),
            Some(id),
            "refused call's policy_decision has an empty reason".into(),
        ),
        None => push(
            report,
            IssueKind::RefusalWithoutReason,
            path,
            Some(call.line),
            Some(id),
            "refused call has no policy_decision".into(),
        ),
    }
    if let Some(r) = result {
        let ev = &r.ev;
        let ran = ev.status == "ok"
            || ev.exit_code.is_some()
            || ev.signal.is_some()
            || ev.duration_ms > 0
            || ev.stdout_bytes > 0
            || ev.stderr_bytes > 0;
        if ran {
            push(
                report,
                IssueKind::RefusedButExecuted,
                path,
                Some(r.line),
                Some(id),
                format!(
                    "refused call has a result of a run (status {}, exit_code {:?}, signal {:?}, duration {} ms, {} output bytes)",
                    ev.status,
                    ev.exit_code,
                    ev.signal,
                    ev.duration_ms,
                    ev.stdout_bytes + ev.stderr_bytes
                ),
            );
        }
    }
}

fn push(
    report: &mut AuditReport,
    kind: IssueKind,
    file: &Path,
    line: Option<usize>,
    call_id: Option<&str>,
    message: String,
) {
    *report.counts.entry(kind).or_insert(0) += 1;
    report.issues.push(Issue {
        kind,
        file: file.to_path_buf(),
        line,
        call_id: call_id.map(str::to_string),
        message,
    });
}
