//! Exit statuses that answer a question rather than report a failure:
//! `grep` finding nothing, `diff` and `cmp` finding a difference, `test`
//! finding the condition false all exit 1.

use crate::request::CommandSpec;

/// Programs whose exit status 1 (with nothing on stderr) is an answer,
/// and what it says.
const ANSWERS: &[(&str, &str)] = &[
    ("grep", "no line matched"),
    ("egrep", "no line matched"),
    ("fgrep", "no line matched"),
    ("rg", "no line matched"),
    ("diff", "the inputs differ"),
    ("cmp", "the inputs differ"),
    ("test", "the condition is false"),
    ("[", "the condition is false"),
];

/// The program whose exit status is the command's: the last simple
/// command's (a pipeline's last stage, a list's last command).
pub(crate) fn last_program(cmd: &CommandSpec) -> Option<String> {
    let first = match cmd {
        CommandSpec::Argv(v) => v.first()?.clone(),
        CommandSpec::Shell(s) => {
            let script = crate::lexer::lex(s).ok()?;
            script.commands.last()?.words.first()?.value.clone()
        }
    };
    Some(first.rsplit('/').next().unwrap_or(&first).to_string())
}

/// The message for an answering exit, when `program` exited 1 without a
/// word on stderr.
pub(crate) fn no_match(program: Option<&str>, code: i32, stderr: &str) -> Option<String> {
    if code != 1 || !stderr.trim().is_empty() {
        return None;
    }
    let (name, says) = ANSWERS.iter().find(|(n, _)| Some(*n) == program)?;
    Some(format!(
        "exit status 1 from `{name}`: {says}; the command ran correctly"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(s: &str) -> Option<String> {
        last_program(&CommandSpec::Shell(s.into()))
    }

    #[test]
    fn the_last_command_answers() {
        assert_eq!(shell("grep -r foo src | sort").as_deref(), Some("sort"));
        assert_eq!(
            shell("cd src && /usr/bin/grep foo x").as_deref(),
            Some("grep")
        );
        assert_eq!(shell("[ -f setup.py ]").as_deref(), Some("["));
        assert_eq!(
            last_program(&CommandSpec::Argv(vec!["diff".into(), "a".into()])).as_deref(),
            Some("diff")
        );
        assert!(no_match(Some("grep"), 1, "").is_some());
        assert!(no_match(Some("diff"), 1, "\n").is_some());
        // An error is not an answer: grep says so on stderr, with status 2.
        assert!(no_match(Some("grep"), 2, "").is_none());
        assert!(no_match(Some("grep"), 1, "grep: x: No such file or directory").is_none());
        assert!(no_match(Some("pytest"), 1, "").is_none());
    }
}
