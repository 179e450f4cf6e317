//! Stage 1: the request against the policy's limits, before anything reads
//! the command. Every transport already checked types; this checks sizes
//! and values, which depend on the policy.

use super::refusal::Refusal;
use crate::policy::Limits;
use crate::request::{CommandSpec, RunRequest};

pub(crate) fn validate(req: &RunRequest, l: &Limits) -> Result<(), Refusal> {
    check_command(&req.command, l.max_command_bytes)?;
    if let Some(t) = req.timeout_ms {
        if t == 0 {
            return bad("timeout_ms: must be at least 1".into());
        }
        if t > l.max_timeout_ms {
            return bad(format!(
                "timeout_ms: {t} is above the policy's maximum of {} ms",
                l.max_timeout_ms
            ));
        }
    }
    if let Some(s) = &req.stdin
        && s.len() > l.max_stdin_bytes
    {
        return bad(format!(
            "stdin: {} bytes, the limit is {}",
            s.len(),
            l.max_stdin_bytes
        ));
    }
    if req.output_chars == Some(0) {
        return bad("output_chars: must be at least 1".into());
    }
    Ok(())
}

fn check_command(command: &CommandSpec, max_bytes: usize) -> Result<(), Refusal> {
    match command {
        CommandSpec::Shell(s) if s.trim().is_empty() => bad("command: empty".into()),
        CommandSpec::Shell(s) if s.len() > max_bytes => bad(format!(
            "command: {} bytes, the limit is {max_bytes}",
            s.len()
        )),
        CommandSpec::Shell(s) if s.contains('\0') => bad("command: contains a NUL byte".into()),
        CommandSpec::Argv(v) if v.is_empty() => bad("command: empty argv".into()),
        // Each argument costs its bytes plus the NUL that ends it in argv.
        CommandSpec::Argv(v) if v.iter().map(|a| a.len() + 1).sum::<usize>() > max_bytes => bad(
            format!("command: longer than the limit of {max_bytes} bytes"),
        ),
        CommandSpec::Argv(v) if v.iter().any(|a| a.contains('\0')) => {
            bad("command: an argument contains a NUL byte".into())
        }
        _ => Ok(()),
    }
}

fn bad(message: String) -> Result<(), Refusal> {
    Err(Refusal::InvalidArguments(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_command_bytes: 10,
            max_timeout_ms: 1_000,
            max_stdin_bytes: 4,
            ..Limits::default()
        }
    }

    fn refused(req: RunRequest) -> String {
        match validate(&req, &limits()) {
            Err(Refusal::InvalidArguments(m)) => m,
            other => panic!("{req:?} -> {other:?}"),
        }
    }

    fn shell(s: &str) -> RunRequest {
        RunRequest::new(CommandSpec::Shell(s.into()))
    }

    #[test]
    fn each_field_is_named_when_it_is_out_of_bounds() {
        assert_eq!(refused(shell("  ")), "command: empty");
        assert!(refused(shell("echo 0123456789")).starts_with("command: 15 bytes"));
        assert_eq!(refused(shell("a\0b")), "command: contains a NUL byte");
        assert_eq!(
            refused(RunRequest::new(CommandSpec::Argv(vec![]))),
            "command: empty argv"
        );
        assert_eq!(
            refused(RunRequest::new(CommandSpec::Argv(vec!["a\0".into()]))),
            "command: an argument contains a NUL byte"
        );
        // Five 1-byte arguments take ten bytes with their terminators.
        let argv = RunRequest::new(CommandSpec::Argv(vec!["a".into(); 6]));
        assert!(refused(argv).starts_with("command: longer than"));
        let mut r = shell("ls");
        r.timeout_ms = Some(0);
        assert_eq!(refused(r), "timeout_ms: must be at least 1");
        let mut r = shell("ls");
        r.timeout_ms = Some(1_001);
        assert!(refused(r).starts_with("timeout_ms: 1001 is above"));
        let mut r = shell("ls");
        r.stdin = Some("12345".into());
        assert_eq!(refused(r), "stdin: 5 bytes, the limit is 4");
        let mut r = shell("ls");
        r.output_chars = Some(0);
        assert_eq!(refused(r), "output_chars: must be at least 1");
    }

    #[test]
    fn a_request_inside_every_bound_passes() {
        let mut r = shell("ls -l");
        r.timeout_ms = Some(1_000);
        r.stdin = Some("1234".into());
        r.output_chars = Some(1);
        assert_eq!(validate(&r, &limits()), Ok(()));
        let argv = RunRequest::new(CommandSpec::Argv(vec!["a".into(); 5]));
        assert_eq!(validate(&argv, &limits()), Ok(()));
    }
}
