//! "Approve and remember": an approval turned into an allow rule for the
//! program and an argument prefix, appended to the amendments file in the
//! state directory (private to the supervisor's uid, outside the project,
//! so no command can write it), and loaded by the service before each
//! decision.

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::ApprovalRecord;
use crate::lexer;
use crate::policy::{Policy, RiskLevel};

/// The amendments file's name in the state directory.
pub const AMENDMENTS_FILE: &str = "policy-amendments.toml";

/// One remembered approval as a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amendment {
    pub id: String,
    pub program: String,
    pub prefix: Vec<String>,
    /// The rule in the policy's TOML syntax, as it is saved.
    pub toml: String,
}

/// The allow rule that remembers approval `a`: its program, and its
/// arguments (the first `prefix_args` of them when given) as a prefix.
/// Only one plain command can be remembered: no operators, redirections,
/// assignments or expansions, whose meaning a prefix cannot pin down.
pub fn amendment_for(
    a: &ApprovalRecord,
    prefix_args: Option<usize>,
    uid: u32,
) -> Result<Amendment, String> {
    let words = plain_words(&a.command, a.shell)?;
    let Some((program, args)) = words.split_first() else {
        return Err("the command is empty".into());
    };
    let keep = prefix_args.unwrap_or(args.len()).min(args.len());
    let prefix = args[..keep].to_vec();
    let suffix = a.id.strip_prefix("ap-").unwrap_or(&a.id);
    let id = format!("approved-{}", &suffix[..suffix.len().min(16)]);
    let reason = format!(
        "A human (uid {uid}) approved this command and remembered it (approval {}). The policy said: {}",
        a.id, a.reason
    );
    let mut toml = String::new();
    let _ = writeln!(toml, "[[rule]]");
    let _ = writeln!(toml, "id = {}", quoted(&id));
    let _ = writeln!(toml, "program = {}", quoted(program));
    let list: Vec<String> = prefix.iter().map(|p| quoted(p)).collect();
    let _ = writeln!(toml, "prefix = [{}]", list.join(", "));
    let _ = writeln!(toml, "action = \"allow\"");
    let _ = writeln!(toml, "risk = \"{}\"", risk_name(a.risk));
    let _ = writeln!(toml, "reason = {}", quoted(&reason));
    Ok(Amendment {
        id,
        program: program.clone(),
        prefix,
        toml,
    })
}

fn plain_words(command: &str, shell: bool) -> Result<Vec<String>, String> {
    if !shell {
        return shell_words::split(command).map_err(|e| e.to_string());
    }
    let script = lexer::lex(command).map_err(|e| e.to_string())?;
    let not_plain = "only one plain command (no operators, redirections, assignments, substitutions or expansions) can be remembered; approve it without --remember";
    let [cmd] = script.commands.as_slice() else {
        return Err(not_plain.into());
    };
    if !script.unsupported.is_empty()
        || !cmd.redirects.is_empty()
        || !cmd.assignments.is_empty()
        || cmd.words.iter().any(|w| expands(&w.features))
    {
        return Err(not_plain.into());
    }
    Ok(cmd.words.iter().map(|w| w.value.clone()).collect())
}

fn expands(f: &lexer::Features) -> bool {
    f.command_substitution
        || f.process_substitution
        || f.parameter_expansion
        || f.arithmetic
        || f.glob
        || f.brace
        || f.tilde
}

fn risk_name(r: RiskLevel) -> &'static str {
    match r {
        RiskLevel::Low => "low",
        RiskLevel::Medium => "medium",
        RiskLevel::High => "high",
        RiskLevel::Critical => "critical",
    }
}

/// A TOML basic string: quotes, backslashes and every control character
/// escaped, so the saved rule says exactly what was approved.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The amendments file of a state directory.
pub fn amendments_path(state_dir: &Path) -> PathBuf {
    state_dir.join(AMENDMENTS_FILE)
}

/// The amendments file's text with `rule` appended.
pub(crate) fn appended(existing: &str, rule: &str) -> String {
    let mut text = existing.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(rule);
    text
}

/// Writes the amendments file whole (a new file renamed over the old one,
/// mode 0600), so a reader never sees half a rule.
pub(crate) fn save(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Identifies one version of the amendments file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

/// The policy a service decides under: its own, with the amendments file
/// applied as it is now. One `stat` per decision; the file is read again
/// only when it changed. An amendments file that does not validate is
/// ignored (its allow rules would only widen the policy) and logged.
pub(crate) struct LiveAmendments {
    path: PathBuf,
    base: Arc<Policy>,
    current: RwLock<(Option<Stamp>, Arc<Policy>)>,
}

impl LiveAmendments {
    pub(crate) fn new(path: PathBuf, base: Arc<Policy>) -> LiveAmendments {
        LiveAmendments {
            path,
            current: RwLock::new((None, base.clone())),
            base,
        }
    }

    pub(crate) fn policy(&self) -> Arc<Policy> {
        let stamp = std::fs::metadata(&self.path).ok().map(|m| Stamp {
            ino: m.ino(),
            size: m.size(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
        });
        {
            let cur = self.current.read().unwrap_or_else(|p| p.into_inner());
            if cur.0 == stamp {
                return cur.1.clone();
            }
        }
        let policy = match stamp {
            None => self.base.clone(),
            Some(_) => self.load(),
        };
        let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
        *cur = (stamp, policy.clone());
        policy
    }

    fn load(&self) -> Arc<Policy> {
        let shown = self.path.display().to_string();
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(file = %shown, error = %e, "cannot read the policy amendments; deciding without them");
                return self.base.clone();
            }
        };
        match self.base.with_amendments(&text, &shown) {
            Ok(p) => {
                tracing::info!(file = %shown, policy_sha256 = %p.sha256, "policy amendments loaded");
                Arc::new(p)
            }
            Err(e) => {
                tracing::error!(file = %shown, error = %e, "the policy amendments do not validate; deciding without them");
                self.base.clone()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::ApprovalState;

    fn record(command: &str, shell: bool) -> ApprovalRecord {
        ApprovalRecord {
            id: "ap-0123456789abcdef0123456789abcdef".into(),
            uid: 0,
            session: "default".into(),
            args_hash: "h".into(),
            cwd: "/".into(),
            policy_sha256: "p".into(),
            base_policy_sha256: "p".into(),
            policy_name: "n".into(),
            command: command.into(),
            shell,
            rule: "r".into(),
            risk: RiskLevel::High,
            reason: "runs \"code\"".into(),
            approvers: vec![0],
            created_ms: 0,
            expires_ms: 1,
            state: ApprovalState::Pending,
            decided_by: None,
            decided_ms: None,
            used_by: None,
        }
    }

    #[test]
    fn a_plain_command_becomes_a_program_and_prefix_rule() {
        let a = amendment_for(&record("python3 -c 'print(\"x\")'", true), None, 0).unwrap();
        assert_eq!(a.program, "python3");
        assert_eq!(a.prefix, vec!["-c", "print(\"x\")"]);
        assert_eq!(a.id, "approved-0123456789abcdef");
        assert!(
            a.toml.contains("prefix = [\"-c\", \"print(\\\"x\\\")\"]\n"),
            "{}",
            a.toml
        );
        let short = amendment_for(&record("python3 -c 'x'", true), Some(1), 0).unwrap();
        assert_eq!(short.prefix, vec!["-c"]);
        let argv = amendment_for(&record("rm 'a b'", false), None, 0).unwrap();
        assert_eq!(argv.prefix, vec!["a b"]);
    }

    #[test]
    fn only_plain_commands_can_be_remembered() {
        for cmd in [
            "ls | rm x",
            "rm $X",
            "rm *.txt",
            "X=1 rm a",
            "rm a > b",
            "rm $(ls)",
        ] {
            assert!(amendment_for(&record(cmd, true), None, 0).is_err(), "{cmd}");
        }
    }

    #[test]
    fn control_characters_are_escaped_in_the_saved_rule() {
        assert_eq!(quoted("a\x1b[2K\n\"\\"), "\"a\\u001B[2K\\u000A\\\"\\\\\"");
        assert_eq!(quoted("x\u{7f}"), "\"x\\u007F\"");
    }
}
