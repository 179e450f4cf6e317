//! The one-shot CLI's compiled-policy cache, through the real binary: a
//! policy is parsed and checked once per policy bytes and binary; a new
//! binary loads in full again, and a damaged entry is ignored and
//! replaced. (The entry format's own checks are unit tests in
//! `crates/policy/src/cache.rs`.)

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agent-exec"))
}

/// Where the supervisor's private directories are for this user (see
/// `crates/sandbox/src/plan/rundir.rs`), first existing one.
fn cache_dirs() -> Vec<PathBuf> {
    let mut bases = vec![
        PathBuf::from("/var/lib/agent-exec/run"),
        PathBuf::from("/run/agent-exec"),
    ];
    if let Some(r) = std::env::var_os("XDG_RUNTIME_DIR") {
        bases.push(Path::new(&r).join("agent-exec"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        bases.push(Path::new(&h).join(".cache/agent-exec"));
    }
    bases
        .into_iter()
        .map(|b| b.join("compiled-policies"))
        .collect()
}

/// The cache entries for these policy bytes, by file name.
fn entries(sha: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for d in cache_dirs() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                if e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{sha}-"))
                {
                    found.push(e.path());
                }
            }
        }
    }
    found.sort();
    found
}

fn check(binary: &Path, policy: &Path, root: &Path, cmd: &str) -> (Option<i32>, String) {
    let out = Command::new(binary)
        .args(["check", "--policy"])
        .arg(policy)
        .arg("--root")
        .arg(root)
        .args(["--shell", cmd])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_policy_is_compiled_once_per_bytes_and_binary_and_damage_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    // Bytes no other test uses, so the entries found are this test's.
    let text = format!(
        "{}\n# policy_cache test {:?}\n",
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/code.toml"))
            .unwrap(),
        std::time::SystemTime::now()
    );
    let sha = hex::encode(Sha256::digest(text.as_bytes()));
    let policy = dir.path().join("code.toml");
    std::fs::write(&policy, &text).unwrap();
    assert!(entries(&sha).is_empty());

    let allowed = check(&bin(), &policy, &root, "git status --short");
    let refused = check(&bin(), &policy, &root, "cat /etc/shadow");
    assert_eq!(allowed.0, Some(0), "{allowed:?}");
    assert_eq!(refused.0, Some(126), "{refused:?}");
    let first = entries(&sha);
    assert_eq!(first.len(), 1, "one entry for one binary: {first:?}");
    // Served from the entry: the same decisions.
    assert_eq!(check(&bin(), &policy, &root, "git status --short"), allowed);
    assert_eq!(check(&bin(), &policy, &root, "cat /etc/shadow"), refused);

    // A new binary (another file: another identity) does not trust the
    // first binary's entry; it loads in full and writes its own.
    let copy = dir.path().join("agent-exec");
    std::fs::copy(bin(), &copy).unwrap();
    assert_eq!(check(&copy, &policy, &root, "git status --short"), allowed);
    let both = entries(&sha);
    assert_eq!(both.len(), 2, "{both:?}");
    let theirs: Vec<&PathBuf> = both.iter().filter(|p| !first.contains(p)).collect();
    assert_eq!(theirs.len(), 1, "{both:?}");

    // A damaged entry: ignored, the decisions stay, and it is replaced by
    // a whole one.
    let entry = theirs[0].clone();
    let mut bytes = std::fs::read(&entry).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(&entry, &bytes).unwrap();
    assert_eq!(check(&copy, &policy, &root, "cat /etc/shadow"), refused);
    assert_eq!(check(&copy, &policy, &root, "git status --short"), allowed);
    let rewritten = std::fs::read(&entry).unwrap();
    assert_ne!(rewritten, bytes, "the damaged entry was replaced");

    // An edit is other bytes: its own entry, its own decision.
    let edited = text.replace("\"git-read\"", "\"git-read-renamed\"");
    assert_ne!(edited, text);
    std::fs::write(&policy, &edited).unwrap();
    let after = check(&bin(), &policy, &root, "git status --short");
    assert_eq!(after.0, Some(0), "{after:?}");
    assert!(after.1.contains("git-read-renamed"), "{after:?}");
    let edited_sha = hex::encode(Sha256::digest(edited.as_bytes()));
    assert_eq!(entries(&edited_sha).len(), 1);

    for p in entries(&sha).into_iter().chain(entries(&edited_sha)) {
        let _ = std::fs::remove_file(p);
    }
}
