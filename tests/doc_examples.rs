//! Every runnable example in the README and docs/*.md runs, and says what
//! the page says it does.
//!
//! A fenced block is runnable when its info string is `console test` or
//! `sh test`:
//! - `sh test`: the block is a bash script (`set -euo pipefail`); it must
//!   exit 0.
//! - `console test`: `$ ` lines are commands, the lines after one are its
//!   expected output (stdout and stderr together). Each expected line must
//!   match an output line, in order (other output lines may come between);
//!   `...` in an expected line matches anything. A command must exit 0,
//!   unless it ends with a `# exit N` comment.
//!
//! The blocks of one page run in order, in one scratch directory holding a
//! copy of the repository's `policies/`, `evals/`, `src/`, `Cargo.toml` and
//! `README.md`, with the `agent-exec` under test first on PATH.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agent-exec");

#[derive(Debug)]
enum Block {
    Script { line: usize, text: String },
    Console { line: usize, text: String },
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((i, l)) = lines.next() {
        let Some(info) = l.trim_start().strip_prefix("```") else {
            continue;
        };
        let words: Vec<&str> = info.split_whitespace().collect();
        let kind = match words.as_slice() {
            ["sh", "test"] => Some(true),
            ["console", "test"] => Some(false),
            _ => None,
        };
        let mut text = String::new();
        for (_, body) in lines.by_ref() {
            if body.trim_start().starts_with("```") {
                break;
            }
            text.push_str(body);
            text.push('\n');
        }
        match kind {
            Some(true) => out.push(Block::Script { line: i + 1, text }),
            Some(false) => out.push(Block::Console { line: i + 1, text }),
            None => {}
        }
    }
    out
}

/// Whether `actual` matches `expected`, where `...` stands for anything.
fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split("...").collect();
    if parts.len() == 1 {
        return expected.trim_end() == actual.trim_end();
    }
    let mut rest = actual;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.trim_end().ends_with(part.trim_end());
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

fn shell(dir: &Path, script: &str) -> (Option<i32>, String) {
    let bin_dir = Path::new(BIN).parent().unwrap();
    let out = Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{script}"), "doc-example"])
        .current_dir(dir)
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir.display()),
        )
        .env("HOME", dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

fn check_console(dir: &Path, page: &str, start: usize, text: &str, failures: &mut Vec<String>) {
    // (line, command, expected exit, expected output lines)
    let mut cmds: Vec<(usize, String, i32, Vec<String>)> = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if let Some(cmd) = l.strip_prefix("$ ") {
            let (cmd, exit) = match cmd.rsplit_once("# exit ") {
                Some((c, n)) => (c.trim_end(), n.trim().parse().unwrap_or(-1)),
                None => (cmd, 0),
            };
            cmds.push((start + 1 + i, cmd.to_string(), exit, Vec::new()));
        } else if let Some(last) = cmds.last_mut() {
            if !l.trim().is_empty() {
                last.3.push(l.to_string());
            }
        }
    }
    for (line, cmd, exit, expected) in cmds {
        let (code, output) = shell(dir, &cmd);
        let at = format!("{page}:{line}: `{cmd}`");
        if code != Some(exit) {
            failures.push(format!("{at}: exit {code:?}, expected {exit}\n{output}"));
            continue;
        }
        let mut actual = output.lines();
        for want in &expected {
            if !actual.by_ref().any(|got| line_matches(want, got)) {
                failures.push(format!(
                    "{at}: expected a line matching\n  {want}\nin order, in:\n{output}"
                ));
                break;
            }
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A scratch project the sandboxed child can write: as root the child runs
/// as the root directory's owner, here `nobody`.
fn scratch() -> tempfile::TempDir {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    for d in ["policies", "evals", "src"] {
        copy_tree(&repo.join(d), &dir.path().join(d));
    }
    for f in ["Cargo.toml", "README.md"] {
        std::fs::copy(repo.join(f), dir.path().join(f)).unwrap();
    }
    if nix::unistd::geteuid().is_root() {
        let status = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
    }
    dir
}

fn pages() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![repo.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

#[test]
fn every_runnable_example_in_the_docs_runs() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let found = blocks(&text);
        if found.is_empty() {
            continue;
        }
        let name = page
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(&page)
            .display()
            .to_string();
        let dir = scratch();
        for block in found {
            ran += 1;
            match block {
                Block::Script { line, text } => {
                    let (code, output) = shell(dir.path(), &text);
                    if code != Some(0) {
                        failures.push(format!("{name}:{line}: script exit {code:?}\n{output}"));
                    }
                }
                Block::Console { line, text } => {
                    check_console(dir.path(), &name, line, &text, &mut failures);
                }
            }
        }
    }
    // The README's quick start is runnable; a change that drops every
    // marker would otherwise pass with nothing run.
    assert!(ran >= 3, "only {ran} runnable blocks found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_matcher_matches_what_it_should_and_nothing_else() {
    assert!(line_matches("a...c", "abbbc"));
    assert!(line_matches("{\"ok\":true,...}", "{\"ok\":true,\"x\":1}"));
    assert!(!line_matches("{\"ok\":true,...}", "{\"ok\":false,\"x\":1}"));
    assert!(line_matches("...end", "the end"));
    assert!(!line_matches("exact", "exactly"));
    let b = blocks("x\n```console test\n$ true\n```\n```sh\nnot run\n```\n```sh test\ntrue\n```\n");
    assert_eq!(b.len(), 2);
}
