//! The workspace's structure, checked: which crate may depend on which,
//! how large a source file may grow, that no crate's top-level modules use
//! each other in a cycle, and where `unsafe` code may live. A reviewer
//! would otherwise be the only guard.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn top() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The normal (not dev, not build) dependencies of each workspace package.
fn normal_deps() -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(top())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut map = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let deps = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        map.insert(p["name"].as_str().unwrap().to_string(), deps);
    }
    map
}

#[test]
fn the_lexer_and_the_policy_depend_on_no_sandbox_service_or_async_crate() {
    let deps = normal_deps();
    let forbidden = [
        "agent-exec",
        "agent-exec-sandbox",
        "tokio",
        "clap",
        "rusqlite",
        "nix",
        "libc",
        "tracing-subscriber",
    ];
    for krate in ["agent-exec-lexer", "agent-exec-policy"] {
        let d = &deps[krate];
        for f in forbidden {
            assert!(!d.contains(f), "{krate} depends on {f}: {d:?}");
        }
    }
    let lexer = &deps["agent-exec-lexer"];
    assert!(
        !lexer.iter().any(|d| d.starts_with("agent-exec")),
        "the lexer depends on no other crate of the workspace: {lexer:?}"
    );
    let policy = &deps["agent-exec-policy"];
    assert!(policy.contains("agent-exec-lexer"), "{policy:?}");
}

#[test]
fn the_sandbox_knows_no_policy_result_or_service() {
    let deps = normal_deps();
    let d = &deps["agent-exec-sandbox"];
    for f in [
        "agent-exec",
        "agent-exec-policy",
        "agent-exec-lexer",
        "tokio",
        "clap",
        "rusqlite",
        "serde_json",
    ] {
        assert!(!d.contains(f), "agent-exec-sandbox depends on {f}: {d:?}");
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every library and binary source directory of the workspace.
fn source_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![top().join("src")];
    for c in fs::read_dir(top().join("crates")).unwrap() {
        dirs.push(c.unwrap().path().join("src"));
    }
    dirs
}

/// A source file (not a test module) stays under this many lines, unless
/// its first lines carry a `// size:` comment saying why it cannot.
const MAX_FILE_LINES: usize = 800;

#[test]
fn no_source_file_is_over_the_limit_without_a_stated_reason() {
    let mut over = Vec::new();
    for dir in source_dirs() {
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name == "tests.rs" || f.components().any(|c| c.as_os_str() == "tests") {
                continue;
            }
            let text = fs::read_to_string(&f).unwrap();
            // Unit tests at the end of a file do not count.
            let code = text.split("\n#[cfg(test)]").next().unwrap_or("");
            let lines = code.lines().count();
            let reason = text
                .lines()
                .take(40)
                .any(|l| l.trim_start().starts_with("// size:"));
            if lines > MAX_FILE_LINES && !reason {
                over.push(format!("{}: {lines} lines", f.display()));
            }
        }
    }
    assert!(
        over.is_empty(),
        "files over {MAX_FILE_LINES} lines: {over:#?}"
    );
}

/// The top-level module a `crate::a::b` path names, for each file of a
/// crate: `src/a.rs` and `src/a/**` belong to `a`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn no_crate_has_a_cycle_between_its_top_level_modules() {
    for src in source_dirs() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut modules = BTreeSet::new();
        for f in &files {
            if let Some(m) = module_of(&src, f) {
                modules.insert(m);
            }
        }
        for f in &files {
            let Some(from) = module_of(&src, f) else {
                continue;
            };
            let text = fs::read_to_string(f).unwrap();
            // Unit tests may reach anywhere in their crate; comments name
            // modules without using them.
            let code: String = text
                .split("\n#[cfg(test)]")
                .next()
                .unwrap_or("")
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            // In `src/a.rs` and `src/a/mod.rs`, `super::` is the crate root.
            let rel = f.strip_prefix(&src).unwrap();
            let n = rel.components().count();
            let at_top = n == 1 || (n == 2 && rel.ends_with("mod.rs"));
            let mut uses: Vec<usize> = code
                .match_indices("crate::")
                .map(|(i, _)| i + "crate::".len())
                .collect();
            if at_top {
                uses.extend(
                    code.match_indices("super::")
                        .map(|(i, _)| i + "super::".len()),
                );
            }
            for i in uses {
                let rest = &code[i..];
                // `crate::{a, b::c}` names several modules at once.
                let names: Vec<String> = match rest.strip_prefix('{') {
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .map(|p| ident(p.trim()))
                        .collect(),
                    None => vec![ident(rest)],
                };
                for name in names {
                    if name != from && modules.contains(&name) {
                        edges.entry(from.clone()).or_default().insert(name);
                    }
                }
            }
        }
        // Depth-first search for a back edge.
        fn visit(
            n: &str,
            edges: &BTreeMap<String, BTreeSet<String>>,
            state: &mut BTreeMap<String, u8>,
            path: &mut Vec<String>,
        ) -> Option<Vec<String>> {
            match state.get(n) {
                Some(1) => {
                    let start = path.iter().position(|p| p == n).unwrap_or(0);
                    let mut cycle = path[start..].to_vec();
                    cycle.push(n.to_string());
                    return Some(cycle);
                }
                Some(_) => return None,
                None => {}
            }
            state.insert(n.to_string(), 1);
            path.push(n.to_string());
            for m in edges.get(n).into_iter().flatten() {
                if let Some(c) = visit(m, edges, state, path) {
                    return Some(c);
                }
            }
            path.pop();
            state.insert(n.to_string(), 2);
            None
        }
        let mut state = BTreeMap::new();
        for m in &modules {
            let cycle = visit(m, &edges, &mut state, &mut Vec::new());
            assert!(
                cycle.is_none(),
                "{}: module cycle {:?}",
                src.display(),
                cycle
            );
        }
    }
}

/// Every `unsafe` block stays in the sandbox crate's `spawn` module tree.
/// The compiler enforces it through `#![deny(unsafe_code)]` in every
/// crate's `lib.rs` and a single `#[allow(unsafe_code)]` on `spawn`; this
/// guards those attributes, so the rule cannot be lifted elsewhere without
/// failing CI. It also keeps that module private and every `unsafe fn` out
/// of any public API: nothing outside the sandbox crate can reach the code
/// that runs between clone and exec.
#[test]
fn unsafe_code_is_denied_outside_spawn() {
    let mut files = Vec::new();
    for src in &source_dirs() {
        let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
        assert!(
            lib.lines().any(|l| l.trim() == "#![deny(unsafe_code)]"),
            "{}/lib.rs must deny unsafe_code crate-wide",
            src.display()
        );
        rust_files(src, &mut files);
    }
    let spawn_lib = top().join("crates/sandbox/src/lib.rs");
    let mut lifted = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let l = line.trim();
            let lifts = [
                "allow(unsafe_code)",
                "expect(unsafe_code)",
                "warn(unsafe_code)",
            ]
            .iter()
            .any(|a| l.contains(a));
            if !lifts || l.starts_with("//") {
                continue;
            }
            let next = lines.get(i + 1).map_or("", |n| n.trim());
            let on_spawn = *file == spawn_lib && next == "mod spawn;";
            if !on_spawn {
                lifted.push(format!("{}:{}: {l}", file.display(), i + 1));
            }
        }
    }
    assert!(
        lifted.is_empty(),
        "unsafe_code may only be allowed on `spawn`: {lifted:?}"
    );

    let lib = fs::read_to_string(&spawn_lib).unwrap();
    assert!(
        lib.lines().any(|l| l.trim() == "mod spawn;"),
        "the sandbox crate's `spawn` module must be declared, and private"
    );
    let public_unsafe: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = fs::read_to_string(file).unwrap();
            text.lines()
                .enumerate()
                .filter(|(_, l)| l.trim_start().starts_with("pub unsafe fn"))
                .map(|(i, l)| format!("{}:{}: {}", file.display(), i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        public_unsafe.is_empty(),
        "no `unsafe fn` may be public: {public_unsafe:?}"
    );
}
