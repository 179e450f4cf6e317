//! The embedder's seams through a real service: an approver, a state store
//! and a trace sink of the test's own, each seeing exactly what the
//! pipeline hands it and changing the answer the way it should.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::*;
use crate::policy::{Decision, Verdict};
use crate::request::SessionId;
use crate::result::ErrorType;
use crate::store::{Begin, Budgets, StoreError};

/// One supervisor for the test binary, as a real process has.
fn supervisor() -> &'static crate::sandbox::Supervisor {
    static SUPERVISOR: std::sync::OnceLock<crate::sandbox::Supervisor> = std::sync::OnceLock::new();
    SUPERVISOR.get_or_init(|| {
        crate::sandbox::Supervisor::init(crate::sandbox::SupervisorOptions::default())
    })
}

const POLICY: &str = r#"
name = "seams"
default = "deny"

[[rule]]
id = "echo"
action = "allow"
risk = "low"
reason = "prints its arguments"
program = "echo"
read_only = true

[[rule]]
id = "touch"
action = "allow"
risk = "low"
reason = "creates files in the project"
program = "touch"
writes = "operands"
needs_key = true

[[rule]]
id = "mkdir"
action = "allow"
risk = "low"
reason = "makes directories in the project"
program = "mkdir"
writes = "operands"

[[rule]]
id = "uname"
action = "require_approval"
risk = "medium"
reason = "a human should see this"
program = "uname"
"#;

/// A project root the sandboxed child may write (it runs as `nobody`
/// when the tests run as root).
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(dir.path(), Some(65_534), Some(65_534)).unwrap();
    }
    dir
}

fn builder(root: &tempfile::TempDir) -> ServiceBuilder {
    Service::builder(Policy::parse(POLICY, "seams.toml").unwrap(), root.path())
}

fn call(s: &Service, req: RunRequest) -> ToolResult {
    s.call(req, &CancelToken::new())
}

/// Answers with a fixed approval and remembers what it was shown.
struct Recording {
    answer: Approval,
    asked: Arc<Mutex<Vec<(String, String)>>>,
}

impl Approver for Recording {
    fn approve(&self, r: &ApprovalRequest<'_>) -> Approval {
        self.asked
            .lock()
            .unwrap()
            .push((r.command_line(), r.decision.rule.clone()));
        self.answer
    }
}

#[test]
fn an_approver_is_asked_only_for_require_approval_and_its_answer_decides() {
    let root = project();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let yes = builder(&root)
        .approver(Recording {
            answer: Approval::Approved,
            asked: asked.clone(),
        })
        .build(supervisor())
        .unwrap();
    assert!(call(&yes, RunRequest::shell("echo hi")).ok);
    assert!(
        asked.lock().unwrap().is_empty(),
        "asked for an allowed call"
    );

    let r = call(&yes, RunRequest::shell("uname -s"));
    assert!(r.ok, "{r:?}");
    assert_eq!((r.approval_required, r.approved), (true, Some(true)));
    assert_eq!(
        *asked.lock().unwrap(),
        vec![("uname -s".to_string(), "uname".to_string())]
    );

    let no = builder(&root)
        .approver(Recording {
            answer: Approval::Denied,
            asked: asked.clone(),
        })
        .build(supervisor())
        .unwrap();
    let r = call(&no, RunRequest::shell("uname -s"));
    assert_eq!(r.error_type, Some(ErrorType::ApprovalRequired));
    assert!(r.message.contains("did not approve"), "{}", r.message);
    assert_eq!((r.approved, r.exit_code), (Some(false), None));

    // The default approver asks nobody and says so.
    let never = builder(&root).build(supervisor()).unwrap();
    let r = call(&never, RunRequest::shell("uname -s"));
    assert!(r.message.contains("non-interactive"), "{}", r.message);
    assert_eq!(r.approved, None);
}

/// An in-memory store that can be told the budget is spent.
#[derive(Default)]
struct Memory {
    keys: Mutex<HashMap<String, (String, Option<ToolResult>)>>,
    spent: Mutex<bool>,
    charged: Mutex<Vec<(String, u64)>>,
}

impl StateStore for Memory {
    fn begin(&self, _: &SessionId, key: &str, args_hash: &str) -> Result<Begin, StoreError> {
        let mut keys = self.keys.lock().unwrap();
        Ok(match keys.get(key) {
            None => {
                keys.insert(key.into(), (args_hash.into(), None));
                Begin::Fresh
            }
            Some((h, _)) if h != args_hash => Begin::KeyReuse {
                stored_args_hash: h.clone(),
            },
            Some((_, Some(r))) => Begin::Duplicate(r.clone()),
            Some((_, None)) => Begin::InFlight,
        })
    }
    fn finish(
        &self,
        _: &SessionId,
        key: &str,
        _args_hash: &str,
        result: &ToolResult,
    ) -> Result<(), StoreError> {
        match self.keys.lock().unwrap().get_mut(key) {
            Some(slot) => {
                slot.1 = Some(result.clone());
                Ok(())
            }
            None => Err(StoreError::NotReserved { key: key.into() }),
        }
    }
    fn budget_check(&self, session: &SessionId, _: &Budgets) -> Result<Option<String>, StoreError> {
        Ok(self
            .spent
            .lock()
            .unwrap()
            .then(|| format!("session {} is out of budget", session.label_or_default())))
    }
    fn budget_charge(&self, session: &SessionId, mutating: bool, _: u64) -> Result<(), StoreError> {
        assert!(mutating);
        self.charged
            .lock()
            .unwrap()
            .push((session.label_or_default().into(), 1));
        Ok(())
    }
}

fn keyed(cmd: &str, key: &str) -> RunRequest {
    let mut r = RunRequest::shell(cmd);
    r.idempotency_key = Some(key.into());
    r.session = Some("s1".into());
    r
}

#[test]
fn a_state_store_keeps_keys_and_budgets_for_mutating_calls_only() {
    let root = project();
    let store = Arc::new(Memory::default());
    let s = builder(&root)
        .store(store.clone())
        .require_idempotency(true)
        .build(supervisor())
        .unwrap();

    // Reading needs no key and spends nothing.
    assert!(call(&s, RunRequest::shell("echo hi")).ok);
    assert!(store.charged.lock().unwrap().is_empty());

    // A call the policy marks needs_key is refused without one...
    let missing = call(&s, RunRequest::shell("touch a"));
    assert_eq!(missing.error_type, Some(ErrorType::InvalidArguments));
    assert!(missing.message.starts_with("args:"), "{}", missing.message);
    assert!(!root.path().join("a").exists());
    // ...an ordinary mutating call runs without one, and is charged.
    let plain = call(&s, RunRequest::shell("mkdir d"));
    assert!(plain.ok, "{plain:?}");
    assert!(root.path().join("d").is_dir());
    store.charged.lock().unwrap().clear();

    let first = call(&s, keyed("touch a", "key-0001"));
    assert!(first.ok, "{first:?}");
    assert!(root.path().join("a").exists());
    assert_eq!(*store.charged.lock().unwrap(), vec![("s1".to_string(), 1)]);
    let again = call(&s, keyed("touch a", "key-0001"));
    assert!(again.duplicate);
    assert_eq!(again.call_id, first.call_id, "the stored answer, as stored");
    let reuse = call(&s, keyed("touch b", "key-0001"));
    assert_eq!(reuse.error_type, Some(ErrorType::InvalidArguments));
    assert!(!root.path().join("b").exists());

    *store.spent.lock().unwrap() = true;
    let spent = call(&s, keyed("touch c", "key-0002"));
    assert_eq!(spent.error_type, Some(ErrorType::BudgetExhausted));
    assert_eq!(spent.policy_decision, Some(Verdict::Allow));
    assert!(!root.path().join("c").exists());
    // The refusal settled the key: a retry gets it back, nothing runs.
    let retry = call(&s, keyed("touch c", "key-0002"));
    assert!(retry.duplicate);
    assert_eq!(retry.error_type, Some(ErrorType::BudgetExhausted));
}

/// Remembers every event it receives, in order.
#[derive(Default)]
struct Events(Mutex<Vec<String>>);

impl TraceSink for Events {
    fn tool_call(&self, id: &str, session: &SessionId, tool: &str, args: &Value, _: u64) {
        let label = session.label();
        self.0
            .lock()
            .unwrap()
            .push(format!("call {id} {label:?} {tool} {args}"));
    }
    fn policy_decision(
        &self,
        id: &str,
        _: &SessionId,
        d: &Decision,
        asked: bool,
        approved: Option<bool>,
    ) {
        self.0
            .lock()
            .unwrap()
            .push(format!("decision {id} {} {asked} {approved:?}", d.rule));
    }
    fn tool_result(&self, id: &str, _: &SessionId, r: &ToolResult) {
        self.0
            .lock()
            .unwrap()
            .push(format!("result {id} {:?}", r.error_type));
    }
}

#[test]
fn a_trace_sink_sees_each_call_and_decision_in_order() {
    let root = project();
    let events = Arc::new(Events::default());
    let s = builder(&root)
        .tracer(events.clone())
        .build(supervisor())
        .unwrap();
    let mut req = RunRequest::shell("echo hi");
    req.session = Some("s9".into());
    let ok = call(&s, req);
    let bad = call(&s, RunRequest::shell("echo 'open"));
    let id = &ok.call_id;
    let bad_id = &bad.call_id;
    assert_eq!(
        *events.0.lock().unwrap(),
        vec![
            format!(r#"call {id} Some("s9") run_shell {{"command":"echo hi"}}"#),
            format!("decision {id} echo false None"),
            format!("result {id} None"),
            format!(r#"call {bad_id} None run_shell {{"command":"echo 'open"}}"#),
            // A command that does not parse never reaches the policy.
            format!("result {bad_id} Some(ParseError)"),
        ]
    );
}

#[test]
fn check_decides_like_a_run_and_runs_nothing() {
    let root = project();
    let s = builder(&root).build(supervisor()).unwrap();
    let d = s.check(&RunRequest::shell("touch made")).unwrap();
    assert_eq!((d.verdict, d.rule.as_str()), (Verdict::Allow, "touch"));
    assert!(!root.path().join("made").exists());
    let refused = s.check(&RunRequest::shell("  ")).unwrap_err();
    assert_eq!(refused.error_type, Some(ErrorType::InvalidArguments));

    let checker = builder(&root).build_checker().unwrap();
    assert_eq!(checker.root(), s.root());
    let mut outside = RunRequest::shell("echo x");
    outside.cwd = Some("..".into());
    let r = checker.check(&outside).unwrap_err();
    assert_eq!(r.matched_rule.as_deref(), Some("builtin:cwd-outside-root"));
}

#[test]
fn a_root_that_is_not_a_directory_is_refused_at_build() {
    let root = project();
    let file = root.path().join("f");
    std::fs::write(&file, "x").unwrap();
    let policy = Policy::parse(POLICY, "seams.toml").unwrap();
    let err = Service::builder(policy, &file)
        .build(supervisor())
        .err()
        .unwrap();
    assert!(matches!(err, ServiceError::RootNotDir { .. }), "{err}");
    let policy = Policy::parse(POLICY, "seams.toml").unwrap();
    let err = Service::builder(policy, root.path().join("none"))
        .build_checker()
        .unwrap_err();
    assert!(matches!(err, ServiceError::Root { .. }), "{err}");
}
