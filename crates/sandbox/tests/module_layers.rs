//! The crate's modules form layers without cycles: each uses only modules
//! below it. `spawn`, the unsafe bottom, takes plain data and nothing from
//! the modules that build it; `exec` is the top. This test reads the
//! sources (test code excluded) and fails on any `crate::` path that
//! points up or sideways, so a cycle cannot creep back in.

use std::fs;
use std::path::{Path, PathBuf};

/// Bottom to top. A module may use the modules before it in this list.
const LAYERS: &[&str] = &[
    // Stand-alone pieces, used by whoever needs them.
    "capture",
    "config",
    "error",
    "summary",
    "violation",
    // clone to exec, all the unsafe code
    "spawn",
    // Landlock, seccomp, privileges, cgroup, run directory
    "plan",
    // the process-wide setup
    "supervisor",
    // Sandbox and RunSandbox
    "sandbox",
    // running, capturing, killing
    "exec",
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The top-level modules named by `crate::<name>` in the non-test code of
/// `file`.
fn uses(file: &Path) -> Vec<(usize, String)> {
    if file.file_name().is_some_and(|n| n == "tests.rs") {
        return Vec::new();
    }
    let text = fs::read_to_string(file).unwrap();
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("").trim();
        // Unit tests sit at the end of a file.
        if code == "#[cfg(test)]" {
            break;
        }
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            // `$crate::` in an exported macro names the crate's public
            // surface from the caller's side, not a module of a layer.
            let in_macro = rest[..at].ends_with('$');
            rest = &rest[at + "crate::".len()..];
            if in_macro {
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.push((i + 1, name));
        }
    }
    found
}

#[test]
fn modules_only_use_the_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut upward = Vec::new();
    let mut seen = 0;
    for (level, module) in LAYERS.iter().enumerate() {
        let mut files = Vec::new();
        let dir = src.join(module);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src.join(format!("{module}.rs")));
        }
        assert!(files.iter().all(|f| f.exists()), "{module}: {files:?}");
        for file in &files {
            for (line, name) in uses(file) {
                seen += 1;
                let allowed = name == *module || LAYERS[..level].contains(&name.as_str());
                if !allowed {
                    upward.push(format!(
                        "{}:{line}: {module} uses crate::{name}",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(
        seen > 20,
        "only {seen} crate:: paths found: is the scan broken?"
    );
    assert!(
        upward.is_empty(),
        "modules must only use the layers below them (bottom to top: {LAYERS:?}):\n{}",
        upward.join("\n")
    );
}

#[test]
fn every_module_has_a_layer() {
    let lib = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let mut test_only = false;
    for line in lib.lines().map(str::trim) {
        if line == "#[cfg(test)]" {
            test_only = true;
        }
        if let Some(name) = line.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) {
            assert!(
                test_only || LAYERS.contains(&name),
                "module {name} has no layer"
            );
            test_only = false;
        }
    }
}
