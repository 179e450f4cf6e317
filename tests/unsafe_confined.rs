//! The workspace keeps every `unsafe` block in the sandbox crate's `spawn`
//! module tree. The compiler enforces it through `#![deny(unsafe_code)]` in
//! every crate's `lib.rs` and a single `#[allow(unsafe_code)]` on `spawn`;
//! this test guards those attributes, so the rule cannot be lifted
//! elsewhere without failing CI. It also keeps that module private and
//! every `unsafe fn` out of any public API: nothing outside the sandbox
//! crate can reach the code that runs between clone and exec.

use std::fs;
use std::path::{Path, PathBuf};

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

#[test]
fn unsafe_code_is_denied_outside_spawn() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut srcs = vec![top.join("src")];
    for c in fs::read_dir(top.join("crates")).unwrap() {
        srcs.push(c.unwrap().path().join("src"));
    }
    let mut files = Vec::new();
    for src in &srcs {
        let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
        assert!(
            lib.lines().any(|l| l.trim() == "#![deny(unsafe_code)]"),
            "{}/lib.rs must deny unsafe_code crate-wide",
            src.display()
        );
        rust_files(src, &mut files);
    }
    let spawn_lib = top.join("crates/sandbox/src/lib.rs");
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
