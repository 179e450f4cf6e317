//! Appending events to trace files.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::event::{
    CallLine, DecisionLine, EVENT_HEADER, EVENT_POLICY_DECISION, EVENT_TOOL_CALL,
    EVENT_TOOL_RESULT, HeaderLine, OPERATION_EXECUTE_TOOL, ResultLine, TRACE_SCHEMA_VERSION,
};
use super::redact::Redactor;
use super::time::{now_unix_ms, rfc3339};
use super::{TraceError, TraceHeader, TraceOptions, args_hash};
use crate::policy::Decision;
use crate::request::SessionId;
use crate::result::ToolResult;

/// Characters of redacted arguments kept in `args_preview`.
const PREVIEW_CHARS: usize = 200;

/// Writes one trace. `Send + Sync`: every event is serialized into a reused
/// buffer and written with a single `write` under the lock, so lines from
/// concurrent calls never interleave.
///
/// Writing never fails the call it describes: an I/O error is logged and
/// counted ([`Tracer::write_errors`]); the run itself has already happened.
pub struct Tracer {
    inner: Mutex<State>,
    redactor: Redactor,
    record_full: bool,
    run_id: String,
    write_errors: AtomicU64,
    /// How the calls were served, when the writer was told (`via` on each
    /// result line).
    via: std::sync::OnceLock<String>,
}

struct State {
    file: File,
    base: PathBuf,
    current: PathBuf,
    segment: u32,
    written: u64,
    rotate_bytes: Option<u64>,
    header: TraceHeader,
    kernel: String,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("run_id", &self.run_id)
            .field("record_full", &self.record_full)
            .finish()
    }
}

impl Tracer {
    /// Opens `path` for appending (creating it and its parent directory) and
    /// writes the header line. Appending to an existing trace is allowed: a
    /// restarted writer adds a new header, and readers treat the file as
    /// the concatenation it is.
    pub fn create(
        path: &Path,
        header: TraceHeader,
        opts: TraceOptions,
    ) -> Result<Tracer, TraceError> {
        Tracer::open_segment(path, 0, header, opts)
    }

    /// Like [`create`](Tracer::create), but goes on in the last segment
    /// an earlier writer of `path` rotated to, so a trace reopened after
    /// rotation keeps its segments in order.
    pub(crate) fn resume(
        path: &Path,
        header: TraceHeader,
        opts: TraceOptions,
    ) -> Result<Tracer, TraceError> {
        let mut segment = 0;
        while segment_path(path, segment + 1).exists() {
            segment += 1;
        }
        Tracer::open_segment(path, segment, header, opts)
    }

    fn open_segment(
        base: &Path,
        segment: u32,
        header: TraceHeader,
        opts: TraceOptions,
    ) -> Result<Tracer, TraceError> {
        let path = &segment_path(base, segment);
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| TraceError::io("create the directory of", path, e))?;
        }
        let file = open_append(path)?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".to_string());
        let tracer = Tracer {
            inner: Mutex::new(State {
                file,
                base: base.to_path_buf(),
                current: path.to_path_buf(),
                segment,
                written,
                rotate_bytes: opts.rotate_bytes.filter(|&n| n > 0),
                header,
                kernel,
                buf: Vec::with_capacity(1024),
            }),
            redactor: Redactor::new(&opts.secret_names),
            record_full: opts.record_full,
            run_id: new_run_id(base),
            write_errors: AtomicU64::new(0),
            via: std::sync::OnceLock::new(),
        };
        {
            let mut st = tracer.lock();
            tracer
                .write_header(&mut st)
                .map_err(|e| TraceError::io("write the header of", path, e))?;
        }
        Ok(tracer)
    }

    /// Records that a tool was asked for. `deadline_ms` is relative to now
    /// (0: none); the audit flags a result that comes later.
    pub fn tool_call(
        &self,
        call_id: &str,
        session: Option<&str>,
        tool: &str,
        args: &serde_json::Value,
        deadline_ms: u64,
    ) {
        let hash = args_hash(args);
        let redacted = self.redactor.redact_value(args);
        let preview = preview(&redacted);
        let ts_ms = now_unix_ms();
        let ts = rfc3339(ts_ms);
        let line = CallLine {
            event: EVENT_TOOL_CALL,
            ts: &ts,
            ts_unix_ms: ts_ms,
            operation: OPERATION_EXECUTE_TOOL,
            run_id: session.unwrap_or(&self.run_id),
            session,
            call_id,
            tool,
            args_hash: &hash,
            args_preview: &preview,
            args: self.record_full.then_some(&redacted),
            deadline_ms,
        };
        self.emit(&line);
    }

    pub fn policy_decision(
        &self,
        call_id: &str,
        decision: &Decision,
        approval_asked: bool,
        approved: Option<bool>,
    ) {
        let reason = self.redactor.redact(&decision.reason);
        let token = decision.token.as_deref().map(|t| self.redactor.redact(t));
        let ts_ms = now_unix_ms();
        let ts = rfc3339(ts_ms);
        let line = DecisionLine {
            event: EVENT_POLICY_DECISION,
            ts: &ts,
            ts_unix_ms: ts_ms,
            call_id,
            decision: decision.verdict,
            rule: &decision.rule,
            risk_level: decision.risk,
            reason: &reason,
            token: token.as_deref(),
            read_only: decision.read_only,
            approval_asked,
            approval_given: approved,
        };
        self.emit(&line);
    }

    pub fn tool_result(&self, call_id: &str, result: &ToolResult) {
        let message = self.redactor.redact(&result.message);
        let full = self.record_full.then(|| self.redact_result(result));
        let ts_ms = now_unix_ms();
        let ts = rfc3339(ts_ms);
        let line = ResultLine {
            event: EVENT_TOOL_RESULT,
            ts: &ts,
            ts_unix_ms: ts_ms,
            call_id,
            status: if result.ok { "ok" } else { "error" },
            error_type: result.error_type,
            exit_code: result.exit_code,
            signal: result.signal,
            duration_ms: result.duration_ms,
            stdout_bytes: result.stdout_bytes,
            stderr_bytes: result.stderr_bytes,
            stdout_truncated: result.stdout_truncated,
            stderr_truncated: result.stderr_truncated,
            policy_decision: result.policy_decision,
            duplicate: result.duplicate,
            message: &message,
            sandbox: result.sandbox.as_ref(),
            provenance: &result.provenance,
            result: full.as_ref(),
            via: self.via.get().map(String::as_str),
        };
        self.emit(&line);
    }

    /// Records a step of an out-of-band approval. The event holds no
    /// arguments, only their hash, so there is nothing to redact.
    pub fn approval(&self, event: &super::approval::ApprovalEvent) {
        let ts_ms = now_unix_ms();
        let ts = rfc3339(ts_ms);
        self.emit(&super::approval::ApprovalLine {
            event: super::approval::EVENT_APPROVAL,
            ts: &ts,
            ts_unix_ms: ts_ms,
            approval: event,
        });
    }

    /// Says on every later result line how the call was served (the CLI
    /// writes `direct` when it ran a call itself although a daemon was
    /// configured). Only the first value set counts.
    pub fn set_via(&self, via: impl Into<String>) {
        let _ = self.via.set(via.into());
    }

    /// Whether results are stored whole (replayable).
    pub fn record_full(&self) -> bool {
        self.record_full
    }

    /// Id of this writer's run, used as `run_id` for calls without a session.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The file currently written (changes on rotation).
    pub fn current_path(&self) -> PathBuf {
        self.lock().current.clone()
    }

    /// Lines that could not be written since creation.
    pub fn write_errors(&self) -> u64 {
        self.write_errors.load(Ordering::Relaxed)
    }

    /// The redactor this trace applies (the service may reuse it for logs).
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    fn redact_result(&self, result: &ToolResult) -> ToolResult {
        let mut r = result.clone();
        let red = &self.redactor;
        for field in [&mut r.stdout, &mut r.stderr, &mut r.message] {
            if let std::borrow::Cow::Owned(s) = red.redact(field) {
                *field = s;
            }
        }
        for field in [&mut r.risk_reason, &mut r.decided_by]
            .into_iter()
            .flatten()
        {
            if let std::borrow::Cow::Owned(s) = red.redact(field) {
                *field = s;
            }
        }
        r
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves at worst a half-built buffer,
        // which is cleared before every use.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn emit<T: Serialize>(&self, line: &T) {
        let mut st = self.lock();
        if let Err(e) = self.emit_locked(&mut st, line) {
            self.write_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(path = %st.current.display(), error = %e, "trace line lost");
        }
    }

    fn emit_locked<T: Serialize>(&self, st: &mut State, line: &T) -> std::io::Result<()> {
        st.buf.clear();
        serde_json::to_writer(&mut st.buf, line)?;
        st.buf.push(b'\n');
        if let Some(limit) = st.rotate_bytes
            && st.written > 0
            && st.written + st.buf.len() as u64 > limit
        {
            let line_bytes = std::mem::take(&mut st.buf);
            let rotated = self.rotate(st);
            st.buf = line_bytes;
            rotated?;
        }
        // The file is unbuffered: one write_all per line is one write(2) for
        // any line under the pipe/page sizes that matter, and the data is in
        // the kernel when this returns.
        st.file.write_all(&st.buf)?;
        st.written += st.buf.len() as u64;
        Ok(())
    }

    fn rotate(&self, st: &mut State) -> std::io::Result<()> {
        let next = st.segment + 1;
        let path = segment_path(&st.base, next);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        st.file = file;
        st.current = path;
        st.segment = next;
        st.written = 0;
        self.write_header(st)
    }

    fn write_header(&self, st: &mut State) -> std::io::Result<()> {
        let start_ms = now_unix_ms();
        let start = rfc3339(start_ms);
        let header = HeaderLine {
            event: EVENT_HEADER,
            schema_version: TRACE_SCHEMA_VERSION,
            agent_exec_version: env!("CARGO_PKG_VERSION"),
            run_id: &self.run_id,
            policy_name: &st.header.policy_name,
            policy_sha256: &st.header.policy_sha256,
            tool_schema_sha256: &st.header.tool_schema_sha256,
            start_time: &start,
            start_time_unix_ms: start_ms,
            host_kernel: &st.kernel,
            landlock_abi: st.header.landlock_abi,
            record_full: self.record_full,
            segment: st.segment,
        };
        let mut buf = Vec::with_capacity(512);
        serde_json::to_writer(&mut buf, &header)?;
        buf.push(b'\n');
        st.file.write_all(&buf)?;
        st.written += buf.len() as u64;
        Ok(())
    }
}

fn open_append(path: &Path) -> Result<File, TraceError> {
    let mut opts = OpenOptions::new();
    opts.create(true).append(true);
    #[cfg(unix)]
    {
        // Traces hold commands and outputs: owner-only by default.
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path).map_err(|e| TraceError::io("open", path, e))
}

/// `trace.jsonl` → `trace.1.jsonl`, `trace` → `trace.1`.
pub(crate) fn segment_path(base: &Path, segment: u32) -> PathBuf {
    if segment == 0 {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match base.extension() {
        Some(ext) => format!("{stem}.{segment}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{segment}"),
    };
    base.with_file_name(name)
}

fn preview(args: &serde_json::Value) -> String {
    // A run_shell call is most readable as its command line.
    let text = match args.get("command").and_then(|c| c.as_str()) {
        Some(cmd) if args.as_object().is_some_and(|o| o.len() == 1) => cmd.to_string(),
        _ => super::canonical_json(args),
    };
    match text.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn new_run_id(path: &Path) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = Sha256::new();
    h.update(now_unix_ms().to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    h.update(path.as_os_str().as_encoded_bytes());
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.update(d.subsec_nanos().to_le_bytes());
    }
    hex::encode(&h.finalize()[..8])
}

/// Session traces kept open at once by default; the least recently used is
/// closed to open another.
pub const MAX_OPEN_SESSION_TRACES: usize = 64;

/// One trace per session under a directory (the daemon's layout):
/// `DIR/<label>.jsonl` for the sessions of the directory's owner (the uid
/// that opened it), `DIR/uid-<uid>/<label>.jsonl` for those of any other
/// uid, each rotated to `<label>.1.jsonl`... by size.
///
/// Labels are client input, so the files kept open are bounded: at most
/// [`MAX_OPEN_SESSION_TRACES`] (see [`with_max_open`](TraceDir::with_max_open)),
/// the least recently used closed first. A closed session's trace is
/// reopened on its next event, in its last segment, after a new header
/// line; a call in progress keeps the file it started with.
pub struct TraceDir {
    dir: PathBuf,
    header: TraceHeader,
    opts: TraceOptions,
    owner: u32,
    open: Mutex<OpenTraces>,
}

/// The open session traces, with when each was last used.
struct OpenTraces {
    by_session: HashMap<(u32, String), (Arc<Tracer>, u64)>,
    clock: u64,
    max: usize,
}

impl TraceDir {
    pub fn open(
        dir: &Path,
        header: TraceHeader,
        opts: TraceOptions,
    ) -> Result<TraceDir, TraceError> {
        std::fs::create_dir_all(dir).map_err(|e| TraceError::io("create the directory", dir, e))?;
        Ok(TraceDir {
            dir: dir.to_path_buf(),
            header,
            opts,
            owner: nix::unistd::geteuid().as_raw(),
            open: Mutex::new(OpenTraces {
                by_session: HashMap::new(),
                clock: 0,
                max: MAX_OPEN_SESSION_TRACES,
            }),
        })
    }

    /// Keeps at most `max` (at least 1) session traces open.
    pub fn with_max_open(self, max: usize) -> TraceDir {
        self.lock().max = max.max(1);
        self
    }

    fn lock(&self) -> MutexGuard<'_, OpenTraces> {
        // The map stays consistent across a panic: entries are whole.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The trace of the owner's session `session`, opened on first use and
    /// shared while it stays open.
    pub fn for_session(&self, session: &str) -> Result<Arc<Tracer>, TraceError> {
        self.tracer_for(&SessionId::new(self.owner, Some(session)))
    }

    /// The trace of `session` (any uid), opened on first use and shared
    /// while it stays open.
    pub fn tracer_for(&self, session: &SessionId) -> Result<Arc<Tracer>, TraceError> {
        let key = (session.uid(), session.label_or_default().to_string());
        let mut open = self.lock();
        open.clock += 1;
        let now = open.clock;
        if let Some((t, used)) = open.by_session.get_mut(&key) {
            *used = now;
            return Ok(Arc::clone(t));
        }
        let tracer = Arc::new(Tracer::resume(
            &self.path_for(session),
            self.header.clone(),
            self.opts.clone(),
        )?);
        if open.by_session.len() >= open.max
            && let Some(oldest) = open
                .by_session
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            open.by_session.remove(&oldest);
        }
        open.by_session.insert(key, (Arc::clone(&tracer), now));
        Ok(tracer)
    }

    /// Session traces open now.
    pub fn open_count(&self) -> usize {
        self.lock().by_session.len()
    }

    /// Forgets a finished session of the owner (its file stays); a later
    /// call reopens it.
    pub fn close_session(&self, session: &str) {
        self.lock()
            .by_session
            .remove(&(self.owner, session.to_string()));
    }

    /// Where a session of the owner has its (first) trace file.
    pub fn session_path(&self, session: &str) -> PathBuf {
        self.path_for(&SessionId::new(self.owner, Some(session)))
    }

    /// Where `session` has its (first) trace file. Labels are client
    /// input: anything but `[A-Za-z0-9_-]` (at most 64 chars) is replaced
    /// by a hash, so a label can never climb out of its directory.
    pub fn path_for(&self, session: &SessionId) -> PathBuf {
        let label = session.label_or_default();
        let safe = !label.is_empty()
            && label.len() <= 64
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let name = if safe {
            label.to_string()
        } else {
            let digest = Sha256::digest(label.as_bytes());
            format!("session-{}", hex::encode(&digest[..12]))
        };
        let dir = if session.uid() == self.owner {
            self.dir.clone()
        } else {
            self.dir.join(format!("uid-{}", session.uid()))
        };
        dir.join(format!("{name}.jsonl"))
    }
}
