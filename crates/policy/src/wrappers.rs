//! Wrappers: programs that run another program (`env`, `nice`, `nohup`,
//! `timeout`, `stdbuf`, `time`, `exec`, `command`, `builtin`, `xargs`).
//! Their own options are skipped so the program they run is decided
//! instead; an option whose effect cannot be followed refuses the whole
//! command, and wrappers whose inner command cannot be followed at all
//! (`sudo`, `chroot`, `parallel`, ...) are refused outright. `xargs` adds
//! arguments read from its input to the inner command: they are only known
//! at run time, like a variable's value, and the kernel sandbox bounds
//! what the inner command can reach with them.

use agent_exec_lexer::Word;

use crate::state::{Access, Cwd, Walk};
use crate::{RiskLevel, Verdict};

/// Programs that run another command in a way that cannot be followed
/// (argument lists built at run time, other users, other namespaces,
/// tracing) or shells whose syntax is not POSIX.
const REFUSED: &[&str] = &[
    "sudo",
    "su",
    "doas",
    "setsid",
    "chroot",
    "unshare",
    "nsenter",
    "flock",
    "watch",
    "parallel",
    "runuser",
    "pkexec",
    "setpriv",
    "capsh",
    "firejail",
    "bwrap",
    "strace",
    "ltrace",
    "gdb",
    "script",
    "expect",
    "busybox",
    "ionice",
    "taskset",
    "chrt",
    "systemd-run",
    "at",
    "batch",
    "csh",
    "tcsh",
    "fish",
];

/// Wrappers that are shell builtins (or keywords), so they wrap whatever
/// the name, with no program lookup.
const SHELL_WRAPPERS: &[&str] = &["exec", "command", "builtin", "time"];

/// Every program `peel` unwraps.
const WRAPPERS: &[&str] = &[
    "env", "nice", "nohup", "timeout", "stdbuf", "time", "exec", "command", "builtin", "xargs",
];

/// Whether `base` names a wrapper `peel` unwraps.
pub(crate) fn is_wrapper(base: &str) -> bool {
    WRAPPERS.contains(&base)
}

/// What is left to decide after a wrapper.
pub(crate) enum Peeled {
    /// The wrapped program is at this argument index.
    Inner(usize),
    /// The wrapper was decided (refused, or runs nothing).
    Decided,
    /// Not a wrapper: decide the program itself.
    Program,
}

/// What a wrapper's options say about what it runs.
enum Unwrapped {
    /// The wrapped program is at this argument index.
    Inner(usize),
    /// The wrapper runs nothing (`env` alone prints the environment).
    Nothing,
    /// `command -v`: a name lookup.
    Lookup,
    NotAWrapper,
}

/// Whether `base` may be peeled as a wrapper: shell-level wrappers always
/// (by their bare name), programs only when their name is trusted.
pub(crate) fn may_wrap(base: &str, bare: bool, trusted: bool) -> bool {
    (bare && SHELL_WRAPPERS.contains(&base)) || trusted
}

impl Walk<'_> {
    /// A program that runs commands out of the policy's sight: refused.
    /// True when `base` is one.
    pub(crate) fn refused_wrapper(&mut self, base: &str, prog: &str) -> bool {
        if !REFUSED.contains(&base) {
            return false;
        }
        let reason = if matches!(base, "sudo" | "su" | "doas" | "runuser" | "pkexec") {
            format!("`{base}` runs commands as another user; privilege changes are never allowed")
        } else {
            format!(
                "`{base}` runs other commands in a way the policy cannot check; run the inner command directly if it is allowed"
            )
        };
        self.builtin(
            Verdict::Deny,
            RiskLevel::High,
            "builtin:unsafe-wrapper",
            reason,
            prog,
        );
        self.read_only = false;
        true
    }

    /// `prog` (named `base`) in program position, peeled if it wraps
    /// another program.
    pub(crate) fn peel(&mut self, base: &str, prog: &str, args: &[Word], cwd: &Cwd) -> Peeled {
        match self.unwrap(base, args, cwd) {
            Ok(Unwrapped::Inner(k)) => Peeled::Inner(k),
            Ok(Unwrapped::Lookup) => {
                self.offer_weak(|| {
                    (
                        "builtin:lookup".into(),
                        "only looks up a command name".into(),
                        Some(prog.to_string()),
                    )
                });
                Peeled::Decided
            }
            Ok(Unwrapped::Nothing) if SHELL_WRAPPERS.contains(&base) || base == "xargs" => {
                self.offer_weak(|| {
                    (
                        "builtin:shell-state".into(),
                        "no command to run".into(),
                        Some(prog.to_string()),
                    )
                });
                Peeled::Decided
            }
            Ok(Unwrapped::Nothing | Unwrapped::NotAWrapper) => Peeled::Program,
            Err(option) => {
                let reason = format!(
                    "`{base} {option}` cannot be unwrapped safely; run the inner command directly (or without that option)"
                );
                self.builtin(
                    Verdict::Deny,
                    RiskLevel::High,
                    "builtin:unsafe-wrapper",
                    reason,
                    prog,
                );
                self.read_only = false;
                Peeled::Decided
            }
        }
    }

    /// Skips a wrapper's own options. `Err` names an option that cannot
    /// be followed.
    fn unwrap<'w>(
        &mut self,
        base: &str,
        args: &'w [Word],
        cwd: &Cwd,
    ) -> Result<Unwrapped, &'w str> {
        let skipped = match base {
            "env" => self.env_options(args, cwd)?,
            "nice" => nice_options(args)?,
            "nohup" => {
                let k = usize::from(args.first().is_some_and(|a| a.value == "--"));
                if args.get(k).is_some_and(|a| a.value.starts_with('-')) {
                    return Ok(Unwrapped::Nothing);
                }
                k
            }
            "timeout" => timeout_options(args)?,
            "stdbuf" => stdbuf_options(args)?,
            "time" => self.time_options(args, cwd)?,
            "exec" => exec_options(args)?,
            "command" => match command_options(args)? {
                Some(k) => k,
                None => return Ok(Unwrapped::Lookup),
            },
            "builtin" => 0,
            "xargs" => self.xargs_options(args, cwd)?,
            _ => return Ok(Unwrapped::NotAWrapper),
        };
        Ok(if skipped < args.len() {
            Unwrapped::Inner(skipped)
        } else {
            Unwrapped::Nothing
        })
    }

    /// `env [-i] [-u NAME] [NAME=value]... prog`: the assignments are
    /// checked like prefix assignments.
    fn env_options<'w>(&mut self, args: &'w [Word], cwd: &Cwd) -> Result<usize, &'w str> {
        let mut k = 0;
        while k < args.len() {
            let v = args[k].value.as_str();
            match v {
                "--" => {
                    k += 1;
                    break;
                }
                "-" | "-i" | "--ignore-environment" | "-0" | "--null" | "-v" | "--debug" => k += 1,
                "-u" | "--unset" => k += 2,
                _ if v.starts_with("--unset=") || (v.starts_with("-u") && v.len() > 2) => k += 1,
                _ if v.starts_with("--block-signal")
                    || v.starts_with("--default-signal")
                    || v.starts_with("--ignore-signal") =>
                {
                    k += 1
                }
                _ if v.starts_with('-') => return Err(v),
                _ => break,
            }
        }
        while k < args.len() && crate::builtins::is_assignment(&args[k].value) {
            self.assignment(&args[k], &args[k].value, cwd);
            k += 1;
        }
        Ok(k)
    }

    /// `xargs [options] prog`: an argument file is read; the variable of
    /// `--process-slot-var` is an assignment.
    fn xargs_options<'w>(&mut self, args: &'w [Word], cwd: &Cwd) -> Result<usize, &'w str> {
        const FLAGS: &[&str] = &[
            "-0",
            "--null",
            "-r",
            "--no-run-if-empty",
            "-t",
            "--verbose",
            "-x",
            "--exit",
            "-p",
            "--interactive",
            "-o",
            "--open-tty",
            "--show-limits",
        ];
        // Options whose value is the next word when not glued on.
        const VALUED: &[char] = &['n', 'L', 'P', 's', 'd', 'E', 'I', 'a'];
        const LONG_VALUED: &[&str] = &[
            "--max-args",
            "--max-lines",
            "--max-procs",
            "--max-chars",
            "--delimiter",
            "--eof",
        ];
        let mut k = 0;
        while k < args.len() {
            let v = args[k].value.as_str();
            if v == "--" {
                k += 1;
                break;
            }
            if !v.starts_with('-') || v == "-" {
                break;
            }
            if FLAGS.contains(&v) {
                k += 1;
                continue;
            }
            if let Some((name, value)) = v.split_once('=') {
                match name {
                    "--arg-file" => self.check_path(v, value, Access::Read, cwd),
                    "--process-slot-var" => self.check_name(value, v),
                    "--replace" => {}
                    _ if LONG_VALUED.contains(&name) => {}
                    _ => return Err(v),
                }
                k += 1;
                continue;
            }
            if LONG_VALUED.contains(&v) || v == "--arg-file" || v == "--process-slot-var" {
                match (v, args.get(k + 1)) {
                    ("--arg-file", Some(file)) => self.check_word(file, Access::Read, cwd),
                    ("--process-slot-var", Some(name)) => self.check_name(&name.value, &name.raw),
                    _ => {}
                }
                k += 2;
                continue;
            }
            if v == "--replace" {
                k += 1;
                continue;
            }
            let mut chars = v[1..].chars();
            match chars.next() {
                // `-i[R]`, `-e[EOF]`, `-l[N]`: optional values, glued only.
                Some('i' | 'e' | 'l') => k += 1,
                Some(c) if VALUED.contains(&c) => {
                    let glued = chars.as_str();
                    let value = if glued.is_empty() {
                        k += 1;
                        args.get(k)
                    } else {
                        None
                    };
                    if c == 'a' {
                        match value {
                            Some(file) => self.check_word(file, Access::Read, cwd),
                            None => self.check_path(v, glued, Access::Read, cwd),
                        }
                    }
                    k += 1;
                }
                _ => return Err(v),
            }
        }
        Ok(k)
    }

    /// `time [-p] [-o FILE] prog`: an output file is a write.
    fn time_options<'w>(&mut self, args: &'w [Word], cwd: &Cwd) -> Result<usize, &'w str> {
        let mut k = 0;
        while k < args.len() {
            let v = args[k].value.as_str();
            if v == "--" {
                k += 1;
                break;
            }
            match v {
                "-p" | "-a" | "--append" | "-v" | "--verbose" | "-q" | "--quiet"
                | "--portability" => k += 1,
                "-f" | "--format" => k += 2,
                "-o" | "--output" => {
                    if let Some(file) = args.get(k + 1) {
                        self.read_only = false;
                        self.check_word(file, Access::Write, cwd);
                    }
                    k += 2;
                }
                _ if v.starts_with("--format=") => k += 1,
                _ if v.starts_with("--output=") => {
                    self.read_only = false;
                    self.check_path(v, &v["--output=".len()..], Access::Write, cwd);
                    k += 1;
                }
                _ if v.starts_with('-') => return Err(v),
                _ => break,
            }
        }
        Ok(k)
    }
}

/// `nice [-n N | -N | --adjustment=N] prog`.
fn nice_options(args: &[Word]) -> Result<usize, &str> {
    let mut k = 0;
    while k < args.len() {
        let v = args[k].value.as_str();
        if v == "--" {
            k += 1;
            break;
        }
        if v == "-n" || v == "--adjustment" {
            k += 2;
        } else if v.starts_with("--adjustment=")
            || (v.starts_with('-')
                && v.len() > 1
                && v[1..]
                    .trim_start_matches('n')
                    .trim_start_matches(['-', '+'])
                    .chars()
                    .all(|c| c.is_ascii_digit()))
        {
            k += 1;
        } else if v.starts_with('-') {
            return Err(v);
        } else {
            break;
        }
    }
    Ok(k)
}

/// `timeout [-k T] [-s SIG] DURATION prog`.
fn timeout_options(args: &[Word]) -> Result<usize, &str> {
    let mut k = 0;
    while k < args.len() {
        let v = args[k].value.as_str();
        if v == "--" {
            k += 1;
            break;
        }
        match v {
            "-k" | "-s" | "--kill-after" | "--signal" => k += 2,
            "--preserve-status" | "--foreground" | "-v" | "--verbose" => k += 1,
            _ if v.starts_with("--kill-after=")
                || v.starts_with("--signal=")
                || (v.starts_with("-k") && v.len() > 2)
                || (v.starts_with("-s") && v.len() > 2) =>
            {
                k += 1
            }
            _ if v.starts_with('-') => return Err(v),
            _ => break,
        }
    }
    // The duration.
    if k < args.len() {
        k += 1;
    }
    Ok(k)
}

/// `stdbuf [-i M] [-o M] [-e M] prog`.
fn stdbuf_options(args: &[Word]) -> Result<usize, &str> {
    let mut k = 0;
    while k < args.len() {
        let v = args[k].value.as_str();
        if v == "--" {
            k += 1;
            break;
        }
        match v {
            "-i" | "-o" | "-e" => k += 2,
            _ if v.starts_with("--input=")
                || v.starts_with("--output=")
                || v.starts_with("--error=") =>
            {
                k += 1
            }
            _ if v.len() > 2
                && (v.starts_with("-i") || v.starts_with("-o") || v.starts_with("-e")) =>
            {
                k += 1
            }
            _ if v.starts_with('-') => return Err(v),
            _ => break,
        }
    }
    Ok(k)
}

/// `exec [-cl] [-a NAME] prog`.
fn exec_options(args: &[Word]) -> Result<usize, &str> {
    let mut k = 0;
    while k < args.len() {
        let v = args[k].value.as_str();
        match v {
            "--" => {
                k += 1;
                break;
            }
            "-c" | "-l" | "-cl" | "-lc" => k += 1,
            "-a" => k += 2,
            _ if v.starts_with('-') => return Err(v),
            _ => break,
        }
    }
    Ok(k)
}

/// `command [-p] prog`; `None` for `command -v`/`-V` (a lookup).
fn command_options(args: &[Word]) -> Result<Option<usize>, &str> {
    let mut k = 0;
    while k < args.len() {
        match args[k].value.as_str() {
            "--" => {
                k += 1;
                break;
            }
            "-p" => k += 1,
            "-v" | "-V" | "-pv" | "-pV" => return Ok(None),
            v if v.starts_with('-') => return Err(v),
            _ => break,
        }
    }
    Ok(Some(k))
}
