//! Who answers `require_approval`: the seam an agent host plugs its own
//! approval UI into.

use std::path::Path;

use super::terminal::visible;
use crate::policy::{Decision, RiskLevel};
use crate::request::CommandSpec;

/// Answers the policy's `require_approval` verdicts, one call at a time.
///
/// The service asks only for calls the policy marked `require_approval`,
/// after validation and before anything runs; denied and allowed calls
/// never reach the approver. Calls may be concurrent, and the call waits
/// for the answer, so an approver that asks a human should time out on
/// its own and answer [`Approval::Denied`] rather than wait forever.
///
/// [`NeverApprover`] (the default) and [`TtyApprover`] are the shipped
/// implementations.
pub trait Approver: Send + Sync {
    fn approve(&self, request: &ApprovalRequest<'_>) -> Approval;
}

/// What an approver is shown.
#[non_exhaustive]
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRequest<'a> {
    pub call_id: &'a str,
    pub session: Option<&'a str>,
    pub command: &'a CommandSpec,
    /// The resolved working directory, inside the project root.
    pub cwd: &'a Path,
    /// The verdict being asked about: its rule, risk and reason.
    pub decision: &'a Decision,
}

impl ApprovalRequest<'_> {
    /// The command as one line a human can read: the shell string as sent,
    /// or the argv quoted for a shell.
    pub fn command_line(&self) -> String {
        match self.command {
            CommandSpec::Shell(s) => s.clone(),
            CommandSpec::Argv(v) => shell_words::join(v),
        }
    }

    /// What [`TtyApprover`] writes to the terminal: the risk, rule, reason
    /// and command on lines of their own, every control, bidi and
    /// invisible character in them escaped, as every approval is shown
    /// (see [`render`]); then the question, whose default is no.
    pub fn prompt(&self) -> String {
        let d = self.decision;
        format!(
            "{}\nRun it? [y/N] ",
            render(d.risk, &d.rule, &d.reason, &self.command_line())
        )
    }
}

/// The risk, rule, reason and command on lines of their own, every
/// control, bidi and invisible character in them escaped, so the command
/// shown is the command that runs.
pub fn render(risk: RiskLevel, rule: &str, reason: &str, command: &str) -> String {
    format!(
        "agent-exec: approval required ({risk:?} risk, rule {}): {}\n  command: {}",
        visible(rule),
        visible(reason),
        visible(command)
    )
}

/// An approver's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Run it.
    Approved,
    /// Someone was asked and said no (or gave no clear yes).
    Denied,
    /// There is nobody to ask; the refusal says the run is non-interactive.
    Unavailable,
}

impl Approval {
    /// `(asked, answer)` as results and traces record them.
    pub(crate) fn recorded(self) -> (bool, Option<bool>) {
        match self {
            Approval::Approved => (true, Some(true)),
            Approval::Denied => (true, Some(false)),
            Approval::Unavailable => (false, None),
        }
    }
}

/// Nobody approves: every `require_approval` call is refused with
/// `APPROVAL_REQUIRED`. The default, and what a non-interactive run wants.
#[derive(Debug, Clone, Copy, Default)]
pub struct NeverApprover;

impl Approver for NeverApprover {
    fn approve(&self, _request: &ApprovalRequest<'_>) -> Approval {
        Approval::Unavailable
    }
}

/// Asks the human at the controlling terminal (`/dev/tty`), so a prompt
/// works even when stdin and stdout carry the tool's JSON. Anything but an
/// explicit yes is a no; so is the absence of a terminal.
#[derive(Debug, Clone, Copy, Default)]
pub struct TtyApprover;

impl Approver for TtyApprover {
    fn approve(&self, request: &ApprovalRequest<'_>) -> Approval {
        use std::io::{BufRead, BufReader, Write};
        let Ok(mut tty) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        else {
            return Approval::Denied;
        };
        let _ = tty.write_all(request.prompt().as_bytes());
        let _ = tty.flush();
        let mut line = String::new();
        if BufReader::new(&mut tty).read_line(&mut line).is_err() {
            return Approval::Denied;
        }
        if is_yes(&line) {
            Approval::Approved
        } else {
            Approval::Denied
        }
    }
}

fn is_yes(line: &str) -> bool {
    matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_yes_approves() {
        for yes in ["y\n", "Y", " yes \n", "YES", "Yes"] {
            assert!(is_yes(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "yep", "ja", "y y", "sure"] {
            assert!(!is_yes(no), "{no:?}");
        }
    }

    #[test]
    fn answers_are_recorded_as_asked_and_given() {
        assert_eq!(Approval::Approved.recorded(), (true, Some(true)));
        assert_eq!(Approval::Denied.recorded(), (true, Some(false)));
        assert_eq!(Approval::Unavailable.recorded(), (false, None));
    }

    #[test]
    fn argv_is_shown_quoted_for_a_shell() {
        let d = Decision {
            verdict: crate::policy::Verdict::RequireApproval,
            rule: "r".into(),
            risk: crate::policy::RiskLevel::High,
            reason: "x".into(),
            token: None,
            read_only: false,
            needs_shell: false,
            needs_key: false,
            injected: Vec::new(),
            suggestion: None,
        };
        let argv = CommandSpec::Argv(vec!["rm".into(), "a file".into()]);
        let req = ApprovalRequest {
            call_id: "c",
            session: None,
            command: &argv,
            cwd: Path::new("/"),
            decision: &d,
        };
        assert_eq!(req.command_line(), "rm 'a file'");
        assert_eq!(NeverApprover.approve(&req), Approval::Unavailable);
    }

    #[test]
    fn the_prompt_shows_escape_codes_instead_of_obeying_them() {
        let d = Decision {
            verdict: crate::policy::Verdict::RequireApproval,
            rule: "runners".into(),
            risk: crate::policy::RiskLevel::High,
            reason: "Running code can write files".into(),
            token: None,
            read_only: false,
            needs_shell: true,
            needs_key: false,
            injected: Vec::new(),
            suggestion: None,
        };
        // Erase the line, go up, and print a harmless-looking prompt over
        // the real one; then hide the rest right-to-left.
        let spoof = "python3 -c 'import os' # \x1b[2K\r\x1b[1A\x1b[2Kagent-exec: approval required (Low risk, rule read-tools): ok\n  command: cat README.md\u{202e}";
        let cmd = CommandSpec::Shell(spoof.into());
        let req = ApprovalRequest {
            call_id: "c",
            session: None,
            command: &cmd,
            cwd: Path::new("/"),
            decision: &d,
        };
        let prompt = req.prompt();
        assert!(
            !prompt
                .chars()
                .any(|c| c == '\x1b' || c == '\r' || c == '\u{202e}'),
            "{prompt:?}"
        );
        assert_eq!(
            prompt,
            "agent-exec: approval required (High risk, rule runners): Running code can write files\n  command: python3 -c 'import os' # \\x1b[2K\\x0d\\x1b[1A\\x1b[2Kagent-exec: approval required (Low risk, rule read-tools): ok\\x0a  command: cat README.md\\u{202e}\nRun it? [y/N] "
        );
        assert_eq!(prompt.lines().count(), 3);
    }

    #[test]
    fn every_field_is_escaped_and_stays_on_its_line() {
        let r = render(
            RiskLevel::High,
            "r\x1b[2K",
            "why\u{202e}",
            "rm -rf x\n  command: ls",
        );
        assert_eq!(
            r,
            "agent-exec: approval required (High risk, rule r\\x1b[2K): why\\u{202e}\n  command: rm -rf x\\x0a  command: ls"
        );
        assert_eq!(r.lines().count(), 2);
    }
}
