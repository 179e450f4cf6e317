//! Free text per program: options whose value, and operands that, are
//! messages, patterns, scripts or names rather than paths. Argument
//! provenance tags only paths, so these are left out of
//! `Policy::path_arguments`. Rules that mark a `pattern_operand` already
//! consume the pattern; this list covers the rest of the vocabulary.

/// What the operands (words that are not options) of a program are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operands {
    /// Paths.
    Paths,
    /// The first is a pattern, script or filter (unless an option in
    /// `text_options` supplied it); the rest are paths.
    FirstIsText,
    /// None is a path (`echo`, `printf`).
    AllText,
    /// Bare words are names (build targets, test filters); only words
    /// with a `/` are paths.
    BareNames,
}

/// What one program takes as free text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FreeText {
    /// Options whose next word is free text (or a non-path value).
    pub(crate) options: &'static [&'static str],
    /// Options after which every word is text for something else
    /// (`python -c CODE ARGS`, `bash -c SCRIPT`).
    pub(crate) stops: &'static [&'static str],
    /// Options that supply the pattern or script a `FirstIsText` program
    /// would otherwise take from its first operand.
    pub(crate) text_options: &'static [&'static str],
    pub(crate) operands: Operands,
    /// Words after `--` belong to another program (`cargo run -- ARGS`).
    pub(crate) stop_at_dashdash: bool,
}

impl FreeText {
    pub(crate) fn supplies_text(&self, option: &str) -> bool {
        self.text_options.iter().any(|o| {
            option == *o
                || (o.starts_with("--") && option.starts_with(&format!("{o}=")))
                || (!o.starts_with("--") && option.len() > 2 && option.starts_with(o))
        })
    }
}

const PATHS: FreeText = FreeText {
    options: &[],
    stops: &[],
    text_options: &[],
    operands: Operands::Paths,
    stop_at_dashdash: false,
};

const GREP_OPTIONS: &[&str] = &[
    "-e",
    "--regexp",
    "-m",
    "--max-count",
    "-A",
    "-B",
    "-C",
    "--context",
    "--after-context",
    "--before-context",
    "--label",
    "--include",
    "--exclude",
    "--exclude-dir",
    "-g",
    "--glob",
    "-t",
    "--type",
    "--type-not",
    "--color",
    "--colors",
    "-M",
    "--max-columns",
    "-j",
    "--threads",
    "--replace",
    "--encoding",
    "--sort",
    "--sortr",
];

/// The free text of `program` (by base name).
pub(crate) fn of(program: &str) -> FreeText {
    match program {
        "git" => FreeText {
            options: &[
                "-m",
                "--message",
                "-c",
                "--author",
                "--format",
                "--pretty",
                "--grep",
                "-S",
                "-G",
                "--date",
                "-b",
                "-B",
                "--orphan",
                "--since",
                "--until",
                "--after",
                "--before",
                "-n",
                "--max-count",
                "--abbrev",
                "-U",
                "--unified",
                "--committer",
                "--depth",
                "--branch",
                "-o",
                "--origin",
            ],
            ..PATHS
        },
        "grep" | "egrep" | "fgrep" | "rg" | "ag" | "ack" => FreeText {
            options: GREP_OPTIONS,
            text_options: &["-e", "--regexp", "-f", "--file"],
            operands: Operands::FirstIsText,
            ..PATHS
        },
        "sed" => FreeText {
            options: &["-e", "--expression", "-l", "--line-length", "-s"],
            text_options: &["-e", "--expression", "-f", "--file"],
            operands: Operands::FirstIsText,
            ..PATHS
        },
        "awk" | "gawk" | "mawk" | "nawk" => FreeText {
            options: &["-F", "--field-separator", "-v", "--assign"],
            text_options: &["-f", "--file", "-e", "--source"],
            operands: Operands::FirstIsText,
            ..PATHS
        },
        "jq" | "yq" => FreeText {
            options: &["--arg", "--argjson", "--indent"],
            text_options: &["-f", "--from-file"],
            operands: Operands::FirstIsText,
            ..PATHS
        },
        "python" | "python3" | "python2" | "pypy" | "pypy3" => FreeText {
            options: &["-W", "-X", "-Q"],
            stops: &["-c", "-m"],
            ..PATHS
        },
        "perl" | "ruby" => FreeText {
            options: &["-I", "-M"],
            stops: &["-e", "-E"],
            ..PATHS
        },
        "node" | "nodejs" | "deno" | "bun" => FreeText {
            stops: &["-e", "--eval", "-p", "--print"],
            ..PATHS
        },
        "sh" | "bash" | "dash" | "zsh" | "ksh" => FreeText {
            stops: &["-c"],
            options: &["-o", "+o", "-O", "+O"],
            ..PATHS
        },
        "find" => FreeText {
            options: &[
                "-name",
                "-iname",
                "-path",
                "-ipath",
                "-wholename",
                "-iwholename",
                "-regex",
                "-iregex",
                "-lname",
                "-ilname",
                "-type",
                "-xtype",
                "-maxdepth",
                "-mindepth",
                "-size",
                "-mtime",
                "-mmin",
                "-atime",
                "-amin",
                "-ctime",
                "-cmin",
                "-perm",
                "-printf",
                "-fprintf",
                "-user",
                "-group",
                "-uid",
                "-gid",
                "-links",
                "-inum",
                "-regextype",
                "-fstype",
                "-used",
            ],
            stops: &["-exec", "-execdir", "-ok", "-okdir"],
            ..PATHS
        },
        "fd" | "fdfind" => FreeText {
            options: &[
                "-e",
                "--extension",
                "-t",
                "--type",
                "-d",
                "--max-depth",
                "-E",
                "--exclude",
                "-x",
                "--exec",
            ],
            operands: Operands::FirstIsText,
            ..PATHS
        },
        "echo" | "printf" | "true" | "false" | "sleep" | "seq" | "expr" | "date" | "kill"
        | "tr" | "test" | "[" | "yes" | "basename" | "dirname" | "export" | "unset" | "exit"
        | "return" | "which" | "type" | "command" | "id" | "whoami" | "uname" | "env"
        | "printenv" => FreeText {
            operands: Operands::AllText,
            ..PATHS
        },
        "head" | "tail" => FreeText {
            options: &[
                "-n",
                "--lines",
                "-c",
                "--bytes",
                "-s",
                "--sleep-interval",
                "--pid",
            ],
            ..PATHS
        },
        "cut" => FreeText {
            options: &[
                "-d",
                "--delimiter",
                "-f",
                "--fields",
                "-c",
                "--characters",
                "-b",
                "--bytes",
                "--output-delimiter",
            ],
            ..PATHS
        },
        "sort" => FreeText {
            options: &[
                "-k",
                "--key",
                "-t",
                "--field-separator",
                "-S",
                "--buffer-size",
                "--parallel",
            ],
            ..PATHS
        },
        "uniq" => FreeText {
            options: &[
                "-f",
                "--skip-fields",
                "-s",
                "--skip-chars",
                "-w",
                "--check-chars",
            ],
            ..PATHS
        },
        "xargs" => FreeText {
            options: &["-I", "-n", "-P", "-d", "-L", "-s", "-E"],
            operands: Operands::AllText,
            ..PATHS
        },
        "touch" => FreeText {
            options: &["-d", "--date", "-t"],
            ..PATHS
        },
        "mkdir" | "install" => FreeText {
            options: &["-m", "--mode", "-o", "--owner", "-g", "--group"],
            ..PATHS
        },
        "chmod" | "chown" | "chgrp" => FreeText {
            operands: Operands::FirstIsText,
            ..PATHS
        },
        "diff" => FreeText {
            options: &[
                "-U",
                "--unified",
                "-C",
                "--context",
                "-I",
                "--ignore-matching-lines",
                "--label",
                "-L",
            ],
            ..PATHS
        },
        "cargo" | "make" | "gmake" | "npm" | "npx" | "pnpm" | "yarn" | "go" | "rustc"
        | "rustup" | "pip" | "pip3" | "uv" | "poetry" | "just" | "ninja" | "cmake" | "mvn"
        | "gradle" | "pytest" | "tox" | "nox" | "docker" | "kubectl" => FreeText {
            options: &[
                "-k",
                "-m",
                "-p",
                "--package",
                "--bin",
                "--example",
                "--test",
                "--bench",
                "--features",
                "-F",
                "-j",
                "--jobs",
                "--target",
                "-r",
                "--run",
                "-E",
                "-C",
                "--profile",
                "--color",
                "-Z",
            ],
            operands: Operands::BareNames,
            stop_at_dashdash: true,
            ..PATHS
        },
        _ => PATHS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_supplies_the_pattern_glued_or_not() {
        let grep = of("grep");
        assert!(grep.supplies_text("-e"));
        assert!(grep.supplies_text("-efoo"));
        assert!(grep.supplies_text("--regexp=foo"));
        assert!(!grep.supplies_text("-n"));
        assert!(!grep.supplies_text("--regexpx"));
    }
}
