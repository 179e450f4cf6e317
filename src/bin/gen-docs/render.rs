//! The generated documentation of the CLI: a man page per command and
//! subcommand, and completions for bash, zsh and fish. Shared by the
//! `gen-docs` binary (which writes the files) and the test that fails when
//! the committed files are stale; both hand it the same `clap::Command`.

use std::path::PathBuf;

use clap_complete::Shell;

/// Every generated file, by path relative to the repository root.
pub fn render(mut cmd: clap::Command) -> Vec<(PathBuf, Vec<u8>)> {
    cmd.build();
    let mut out = Vec::new();
    man_pages(&cmd, "", &mut out);
    for (shell, file) in [
        (Shell::Bash, "agent-exec.bash"),
        (Shell::Zsh, "_agent-exec"),
        (Shell::Fish, "agent-exec.fish"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), "agent-exec", &mut buf);
        out.push((PathBuf::from("completions").join(file), buf));
    }
    out
}

/// `agent-exec.1`, `agent-exec-serve.1`, `agent-exec-policy-validate.1`...
fn man_pages(cmd: &clap::Command, prefix: &str, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let name = if prefix.is_empty() {
        cmd.get_name().to_string()
    } else {
        format!("{prefix}-{}", cmd.get_name())
    };
    // clap takes static names (its `string` feature is off, to keep the
    // main binary lean); a generator run leaks a few dozen bytes.
    let static_name: &'static str = Box::leak(name.clone().into_boxed_str());
    let page = cmd.clone().name(static_name).display_name(static_name);
    let mut buf = Vec::new();
    // Rendering into memory cannot fail but for a bug in the renderer; an
    // empty page then shows up as a diff, not a silent success.
    let _ = clap_mangen::Man::new(page).render(&mut buf);
    out.push((PathBuf::from("docs/man").join(format!("{name}.1")), buf));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        man_pages(sub, &name, out);
    }
}
