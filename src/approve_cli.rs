//! `agent-exec approvals`, `approve` and `reject`: a human deciding out of
//! band, in the state directory the supervisor keeps its approvals in.
//!
//! Who decides is the kernel's word, twice over. The state directory is
//! created mode 0700 by the supervisor's uid, so only that uid and root
//! can open the store at all (a sandboxed command cannot either: the
//! directory is outside the project root, which the service enforces).
//! Within that, the deciding uid is this process's real uid, and it must
//! be one of the approval's approvers (the policy's `[approvals]
//! approvers`, by default the supervisor's uid and root). A directory
//! other users may write is refused: an approval there could be forged.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::approvals::{
    ApprovalRecord, ApprovalState, amendment_for, amendments_path, appended, save,
};
use crate::policy::Policy;
use crate::service::render;
use crate::service::terminal::visible;
use crate::store::SqliteStore;
use crate::trace::{ApprovalAction, ApprovalEvent, TraceHeader, TraceOptions, Tracer};

/// Exit status when the decision was refused (not an approver, already
/// decided, expired, declined at the prompt).
pub const REFUSED: i32 = 126;
/// Exit status for usage errors and failures.
pub const FAILED: i32 = 125;

/// `agent-exec approve` options.
#[derive(Debug, Clone, clap::Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub decide: DecideArgs,
    /// Also save an allow rule for this program and argument prefix to the
    /// policy amendments in the state directory, so the same call runs
    /// without asking from now on. The rule is shown before it is saved.
    #[arg(long, requires = "policy")]
    pub remember: bool,
    /// With --remember: keep only the first N arguments as the prefix
    /// (default: all of them).
    #[arg(long, value_name = "N", requires = "remember")]
    pub prefix_args: Option<usize>,
    /// With --remember: the policy file the supervisor runs (the rule is
    /// checked against it, examples included).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// With --remember: save without asking for confirmation.
    #[arg(long)]
    pub yes: bool,
}

/// `agent-exec reject` options (and the shared part of `approve`).
#[derive(Debug, Clone, clap::Args)]
pub struct DecideArgs {
    /// The supervisor's state directory.
    #[arg(long, value_name = "DIR")]
    pub state: PathBuf,
    /// The approval id (from the APPROVAL_REQUIRED result, or `agent-exec approvals`).
    pub id: String,
}

/// `agent-exec approvals` options.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// The supervisor's state directory.
    #[arg(long, value_name = "DIR")]
    pub state: PathBuf,
    /// Also list decided, used and expired approvals.
    #[arg(long)]
    pub all: bool,
    /// One JSON array instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Why a command stopped, and with which status.
struct Stop(i32, String);

fn failed(m: impl Into<String>) -> Stop {
    Stop(FAILED, m.into())
}

fn refused(m: impl Into<String>) -> Stop {
    Stop(REFUSED, m.into())
}

fn finish(what: &str, r: Result<(), Stop>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(Stop(code, m)) => {
            eprintln!("agent-exec {what}: {}", visible(&m));
            code
        }
    }
}

/// `agent-exec approvals`.
pub fn list(a: &ListArgs) -> i32 {
    finish("approvals", list_inner(a))
}

fn list_inner(a: &ListArgs) -> Result<(), Stop> {
    let store = open_store(&a.state, caller_uid())?;
    let records = store
        .approvals_list(a.all)
        .map_err(|e| failed(e.to_string()))?;
    let mut out = std::io::stdout().lock();
    if a.json {
        let shown: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v["command_shown"] = visible(&r.command).into_owned().into();
                v["expires_at"] = crate::trace::time::rfc3339(r.expires_ms).into();
                v
            })
            .collect();
        let _ = writeln!(out, "{}", serde_json::Value::Array(shown));
        return Ok(());
    }
    if records.is_empty() {
        let _ = writeln!(out, "no pending approvals");
    }
    for r in &records {
        let _ = writeln!(out, "{}\n", describe(r));
    }
    Ok(())
}

/// An approval as a human reads it: the shared rendering, then the
/// session, directory, state and expiry.
fn describe(r: &ApprovalRecord) -> String {
    let now = crate::trace::time::now_unix_ms();
    let state = if r.state == ApprovalState::Pending && r.is_expired(now) {
        "expired".to_string()
    } else {
        r.state.as_str().to_string()
    };
    let left = if r.is_expired(now) {
        String::new()
    } else {
        format!(" (in {} s)", (r.expires_ms - now).div_ceil(1000))
    };
    format!(
        "{} [{state}]\n{}\n  session: uid {}, {}\n  cwd: {}\n  expires: {}{left}",
        visible(&r.id),
        render(r.risk, &r.rule, &r.reason, &r.command),
        r.uid,
        visible(&r.session),
        visible(&r.cwd),
        crate::trace::time::rfc3339(r.expires_ms),
    )
}

/// `agent-exec reject`.
pub fn reject(a: &DecideArgs) -> i32 {
    finish("reject", decide(a, false, None))
}

/// `agent-exec approve`.
pub fn approve(a: &ApproveArgs) -> i32 {
    let remember = a.remember.then_some(a);
    finish("approve", decide(&a.decide, true, remember))
}

fn decide(a: &DecideArgs, approve: bool, remember: Option<&ApproveArgs>) -> Result<(), Stop> {
    let uid = caller_uid();
    let store = open_store(&a.state, uid)?;
    let record = store
        .approval_get(&a.id)
        .map_err(|e| failed(e.to_string()))?
        .ok_or_else(|| failed(format!("no approval has the id {}", a.id)))?;
    // Refuse before showing or asking anything the human cannot do.
    if !record.approvers.contains(&uid) {
        return Err(refused(format!(
            "uid {uid} may not decide approvals here: the policy's approvers are {:?}",
            record.approvers
        )));
    }
    eprintln!("{}", describe(&record));
    let saving = match remember {
        Some(r) => Some(prepare_amendment(&a.state, &record, r, uid)?),
        None => None,
    };
    let decided = store
        .approval_decide(&a.id, approve, uid)
        .map_err(|e| failed(e.to_string()))?
        .map_err(|why| refused(why.to_string()))?;
    let tracer = decisions_trace(&a.state, &decided);
    let action = if approve {
        ApprovalAction::Approved
    } else {
        ApprovalAction::Rejected
    };
    record_event(tracer.as_ref(), &decided, action, uid, None);
    let verb = if approve { "approved" } else { "rejected" };
    println!(
        "{} {verb} by uid {uid}{}",
        visible(&decided.id),
        if approve {
            "; the agent may now send the same request with this approval_id, once"
        } else {
            ""
        }
    );
    if let Some((path, text, rule_id)) = saving {
        save(&path, &text).map_err(|e| {
            failed(format!(
                "approved, but the rule could not be saved to {}: {e}",
                path.display()
            ))
        })?;
        give_to_owner(&path, &a.state);
        record_event(
            tracer.as_ref(),
            &decided,
            ApprovalAction::Amended,
            uid,
            Some(rule_id.clone()),
        );
        println!(
            "rule {} saved to {}; the same call now runs without asking",
            visible(&rule_id),
            path.display()
        );
    }
    Ok(())
}

/// The amended file's path, text and the new rule's id, checked against
/// the policy (examples included) and confirmed by the human.
fn prepare_amendment(
    state: &Path,
    record: &ApprovalRecord,
    r: &ApproveArgs,
    uid: u32,
) -> Result<(PathBuf, String, String), Stop> {
    let policy_path = r
        .policy
        .as_deref()
        .ok_or_else(|| failed("--remember needs --policy FILE"))?;
    let policy = Policy::load(policy_path).map_err(|e| failed(e.to_string()))?;
    if policy.sha256 != record.base_policy_sha256 {
        return Err(failed(format!(
            "{} is not the policy this approval was asked under (sha256 {}, the approval's {}); give the supervisor's policy file",
            policy_path.display(),
            policy.sha256,
            record.base_policy_sha256
        )));
    }
    let amendment = amendment_for(record, r.prefix_args, uid).map_err(failed)?;
    let path = amendments_path(state);
    let existing = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(failed(format!("{}: {e}", path.display()))),
    };
    let text = appended(&existing, &amendment.toml);
    policy
        .with_amendments(&text, &path.display().to_string())
        .map_err(|e| {
            failed(format!(
                "the rule does not validate, nothing was saved or approved: {e}"
            ))
        })?;
    eprintln!(
        "\nThis rule will be added to {}:\n\n{}",
        path.display(),
        visible_lines_of(&amendment.toml)
    );
    if !r.yes && !confirm("Save it and approve? [y/N] ") {
        return Err(refused("not confirmed: nothing was approved or saved"));
    }
    Ok((path, text, amendment.id))
}

fn visible_lines_of(text: &str) -> String {
    crate::service::terminal::visible_lines(text).into_owned()
}

/// Asks on the controlling terminal; anything but an explicit yes (and
/// no terminal at all) is a no.
fn confirm(question: &str) -> bool {
    use std::io::{BufRead, BufReader};
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        eprintln!("no terminal to confirm on; pass --yes to save without confirming");
        return false;
    };
    let _ = tty.write_all(question.as_bytes());
    let _ = tty.flush();
    let mut line = String::new();
    if BufReader::new(&mut tty).read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
}

/// The real uid: who started this process, whatever it may have been
/// granted since.
fn caller_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// Opens the store only in a directory no other user may write, telling
/// a uid the kernel keeps out why.
fn open_store(state: &Path, uid: u32) -> Result<SqliteStore, Stop> {
    let meta = match std::fs::metadata(state) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(refused(format!(
                "uid {uid} cannot open the state directory {}: only the supervisor's uid and root may decide its approvals",
                state.display()
            )));
        }
        Err(e) => return Err(failed(format!("{}: {e}", state.display()))),
    };
    if !meta.is_dir() {
        return Err(failed(format!("{} is not a directory", state.display())));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(failed(format!(
            "the state directory {} is writable by other users (mode {:o}): approvals there could be forged; make it private (chmod 700)",
            state.display(),
            meta.mode() & 0o7777
        )));
    }
    let db = state.join("state.db");
    if let Err(e) = std::fs::metadata(&db) {
        return Err(match e.kind() {
            std::io::ErrorKind::PermissionDenied => refused(format!(
                "uid {uid} cannot open the state directory {}: only the supervisor's uid and root may decide its approvals",
                state.display()
            )),
            _ => failed(format!("{}: no state database ({e})", state.display())),
        });
    }
    SqliteStore::open(state).map_err(|e| match e {
        crate::store::StoreError::Dir { ref source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            refused(format!(
                "uid {uid} cannot write the state directory {}: only the supervisor's uid and root may decide its approvals",
                state.display()
            ))
        }
        other => failed(other.to_string()),
    })
}

/// Files this process creates in the state directory belong to its owner
/// (the supervisor), so a root approver does not lock the supervisor out.
fn give_to_owner(path: &Path, state: &Path) {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    if let Ok(dir) = std::fs::metadata(state) {
        let _ = nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(dir.uid())),
            Some(nix::unistd::Gid::from_raw(dir.gid())),
        );
    }
}

/// The trace of human decisions: `traces/approvals/decisions.jsonl` in
/// the state directory, next to the supervisor's session traces, so an
/// audit of both matches each decision to the call that asked.
pub fn decisions_trace_path(state: &Path) -> PathBuf {
    state
        .join("traces")
        .join("approvals")
        .join("decisions.jsonl")
}

fn decisions_trace(state: &Path, r: &ApprovalRecord) -> Option<Tracer> {
    let path = decisions_trace_path(state);
    let header = TraceHeader {
        policy_name: r.policy_name.clone(),
        policy_sha256: r.policy_sha256.clone(),
        tool_schema_sha256: crate::service::tool_schema_sha256(),
        landlock_abi: crate::sandbox::landlock_abi(),
    };
    match Tracer::create(&path, header, TraceOptions::default()) {
        Ok(t) => {
            for p in [state.join("traces"), state.join("traces/approvals"), path] {
                give_to_owner(&p, state);
            }
            Some(t)
        }
        Err(e) => {
            eprintln!("agent-exec: the decision is not traced: {e}");
            None
        }
    }
}

fn record_event(
    tracer: Option<&Tracer>,
    r: &ApprovalRecord,
    action: ApprovalAction,
    uid: u32,
    detail: Option<String>,
) {
    if let Some(t) = tracer {
        t.approval(&ApprovalEvent {
            action,
            approval_id: r.id.clone(),
            call_id: None,
            uid,
            session: r.session.clone(),
            args_hash: r.args_hash.clone(),
            rule: r.rule.clone(),
            detail,
        });
    }
}
