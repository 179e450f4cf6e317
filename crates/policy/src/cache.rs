//! The compiled-policy cache of the one-shot CLI.
//!
//! A CLI call starts a fresh process, and parsing the policy's TOML (with
//! the spans that name lines in messages) was most of its policy time
//! (BENCHMARKS.md). After a full load, which compiles every regex and
//! checks every example, the compiled form is written to a directory only
//! the supervisor's user can write, keyed by the SHA-256 of the policy's
//! bytes and by this binary's identity. A later call with the same bytes
//! and the same binary reads that instead of parsing.
//!
//! An entry is used only when all of these hold; anything else is ignored
//! and replaced by the next full load, so the cache can make a call faster
//! but never change its decision:
//! - it is a regular file owned by the directory's owner that nobody else
//!   may write, in a directory nobody else may enter;
//! - its header names this format, these policy bytes and this binary
//!   (version, and the executable file's device, inode, size and mtime, so
//!   a rebuilt or replaced engine loads in full again);
//! - the SHA-256 of its payload is the one in the header (a truncated or
//!   altered entry), and the payload parses strictly.
//!
//! The digest catches damage, not a deliberate writer: whoever may write
//! the directory is the supervisor's own user, which is trusted with the
//! policy file itself. Overlays (`extends`) are not cached; they load in
//! full every time.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::engine::Engine;
use crate::load::ExampleFile;
use crate::rules::Rule;
use crate::secret::SecretNames;
use crate::{
    ApprovalsPolicy, BudgetPolicy, DaemonPolicy, EnvPolicy, Limits, Policy, ProvenancePolicy,
    RiskLevel, SandboxPolicy, ShellPolicy, TracePolicy, Verdict,
};

/// Bumped whenever `Compiled` or anything in it changes shape; the binary
/// identity changes with every build anyway, so this guards only against
/// an entry written by a build whose file identity happens to repeat.
/// 2: the payload is postcard, not JSON.
const FORMAT: u32 = 2;

/// Entries kept before those of other binaries are dropped.
const KEEP: usize = 32;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: u32,
    policy_sha256: String,
    binary: String,
    payload_sha256: String,
}

/// A `Policy` without what is rebuilt on load (the engine's lookups and
/// the secret-name regex, both cheap) or what belongs to this call (where
/// the policy was read from).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Compiled {
    name: String,
    description: String,
    default: Verdict,
    default_risk: RiskLevel,
    limits: Limits,
    env: EnvPolicy,
    sandbox: SandboxPolicy,
    budget: BudgetPolicy,
    daemon: DaemonPolicy,
    trace: TracePolicy,
    approvals: ApprovalsPolicy,
    provenance: ProvenancePolicy,
    shell: ShellPolicy,
    rules: Vec<Rule>,
    examples: Vec<(usize, ExampleFile)>,
}

impl Policy {
    /// Compiles, on a thread of its own, the regexes that are not compiled
    /// yet: `[env] secret_pattern` first (the run's environment is
    /// classified before the decision), then the raw `pattern` rules'
    /// regexes every decision searches. Whatever needs one later finds it
    /// ready or waits only for what is left. Nothing when all are compiled
    /// or no thread can be started.
    ///
    /// Why: a policy read from the compiled-policy cache compiles its
    /// regexes on first use, and the code policy's raw patterns were about
    /// half of a one-shot call's decision, its secret pattern a fifth of
    /// the cached load (BENCHMARKS.md); started after the load, they
    /// compile on the other core while the sandbox is prepared.
    pub fn precompile_in_background(&self) {
        let secret = &self.engine.secret_names;
        let first = (!secret.is_compiled()).then(|| secret.compiler());
        let jobs: Vec<Box<dyn FnOnce() + Send>> = first
            .into_iter()
            .map(|job| Box::new(job) as Box<dyn FnOnce() + Send>)
            .chain(
                self.engine
                    .rules
                    .raw_patterns()
                    .map(|re| Box::new(re.compiler()) as Box<dyn FnOnce() + Send>),
            )
            .collect();
        if jobs.is_empty() {
            return;
        }
        // Detached: a process that exits first loses nothing.
        let _ = std::thread::Builder::new()
            .name("agent-exec-regex".into())
            .spawn(move || jobs.into_iter().for_each(|compile| compile()));
    }
}

/// This executable, named by what changes when it is rebuilt or replaced.
fn binary_id() -> Option<String> {
    let exe = fs::metadata("/proc/self/exe").ok()?;
    let identity = format!(
        "{}:{}:{}:{}:{}:{}",
        env!("CARGO_PKG_VERSION"),
        exe.dev(),
        exe.ino(),
        exe.size(),
        exe.mtime(),
        exe.mtime_nsec()
    );
    Some(hex::encode(&Sha256::digest(identity.as_bytes())[..8]))
}

fn entry_path(dir: &Path, policy_sha256: &str, binary: &str) -> PathBuf {
    dir.join(format!("{policy_sha256}-{binary}"))
}

/// The cached policy for these bytes, if a usable entry exists.
pub(crate) fn load(dir: &Path, policy_sha256: &str, origin: &str) -> Option<Policy> {
    load_as(dir, policy_sha256, origin, &binary_id()?)
}

fn load_as(dir: &Path, policy_sha256: &str, origin: &str, binary: &str) -> Option<Policy> {
    let path = entry_path(dir, policy_sha256, binary);
    let bytes = read_private(dir, &path)?;
    let newline = bytes.iter().position(|&b| b == b'\n')?;
    let (head, payload) = (&bytes[..newline], &bytes[newline + 1..]);
    let header: Header = serde_json::from_slice(head).ok()?;
    let payload_sha256 = hex::encode(Sha256::digest(payload));
    if header.format != FORMAT
        || header.policy_sha256 != policy_sha256
        || header.binary != binary
        || header.payload_sha256 != payload_sha256
    {
        return None;
    }
    // Postcard, not JSON: decoding the 50 KB JSON form of the code policy
    // was over half of a cached load (BENCHMARKS.md). Every byte must be
    // part of the value.
    let (c, rest): (Compiled, &[u8]) = postcard::take_from_bytes(payload).ok()?;
    if !rest.is_empty() {
        return None;
    }
    // Compiled on first use or by `precompile_in_background`.
    let secret_names = SecretNames::lazy(c.env.secret_pattern.clone());
    let mut engine = Engine::build(c.rules, &c.env, &c.sandbox, &c.shell, secret_names);
    engine.example_count = c.examples.len();
    Some(Policy {
        name: c.name,
        sha256: policy_sha256.to_string(),
        origin: origin.to_string(),
        default: c.default,
        limits: c.limits,
        env: c.env,
        sandbox: c.sandbox,
        budget: c.budget,
        daemon: c.daemon,
        trace: c.trace,
        approvals: c.approvals,
        provenance: c.provenance,
        shell: c.shell,
        description: c.description,
        default_risk: c.default_risk,
        engine,
        examples: Arc::new(c.examples),
        layers: Vec::new(),
    })
}

/// The entry's bytes, if the directory and the file are the supervisor's
/// alone. The path is checked without following a link, and the opened
/// file must be that same file (device and inode), so what is checked is
/// what is read.
fn read_private(dir: &Path, path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let d = fs::symlink_metadata(dir).ok()?;
    if !d.is_dir() || d.mode() & 0o077 != 0 {
        return None;
    }
    let l = fs::symlink_metadata(path).ok()?;
    if !l.is_file() || l.uid() != d.uid() || l.mode() & 0o022 != 0 {
        return None;
    }
    let mut f = fs::File::open(path).ok()?;
    let m = f.metadata().ok()?;
    if (m.dev(), m.ino()) != (l.dev(), l.ino()) {
        return None;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0));
    f.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Writes the entry for a policy that just passed a full load. Best
/// effort: without it the next call loads in full again.
pub(crate) fn store(dir: &Path, policy: &Policy) {
    if let Some(binary) = binary_id() {
        store_as(dir, policy, &binary);
    }
}

fn store_as(dir: &Path, policy: &Policy, binary: &str) {
    let compiled = Compiled {
        name: policy.name.clone(),
        description: policy.description.clone(),
        default: policy.default,
        default_risk: policy.default_risk,
        limits: policy.limits.clone(),
        env: policy.env.clone(),
        sandbox: policy.sandbox.clone(),
        budget: policy.budget.clone(),
        daemon: policy.daemon.clone(),
        trace: policy.trace.clone(),
        approvals: policy.approvals.clone(),
        provenance: policy.provenance.clone(),
        shell: policy.shell.clone(),
        rules: policy.engine.rules.all().to_vec(),
        examples: policy.examples.as_ref().clone(),
    };
    let Ok(payload) = postcard::to_stdvec(&compiled) else {
        return;
    };
    let header = Header {
        format: FORMAT,
        policy_sha256: policy.sha256.clone(),
        binary: binary.to_string(),
        payload_sha256: hex::encode(Sha256::digest(&payload)),
    };
    let Ok(mut bytes) = serde_json::to_vec(&header) else {
        return;
    };
    bytes.push(b'\n');
    bytes.extend_from_slice(&payload);
    prune(dir, binary);
    let path = entry_path(dir, &policy.sha256, binary);
    // Written aside and renamed, so a concurrent call reads the old entry,
    // none, or the whole new one.
    let tmp = dir.join(format!(".{}.{}", std::process::id(), binary));
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&bytes));
    if written.is_err() || fs::rename(&tmp, &path).is_err() {
        let _ = fs::remove_file(&tmp);
    }
}

/// Once entries pile up, drops those of other binaries (earlier builds).
fn prune(dir: &Path, binary: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    if names.len() < KEEP {
        return;
    }
    let ours = format!("-{binary}");
    for n in names {
        if !n.to_string_lossy().ends_with(&ours) {
            let _ = fs::remove_file(dir.join(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::load::check_examples;
    use crate::overlay::SHIPPED;
    use crate::{CommandSpec, Context};

    const BIN: &str = "0123456789abcdef";

    fn cache_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    fn code() -> Policy {
        Policy::parse(SHIPPED[0].1, "code.toml").unwrap()
    }

    fn entry(dir: &Path, p: &Policy) -> PathBuf {
        entry_path(dir, &p.sha256, BIN)
    }

    fn verdict(p: &Policy, cmd: &str) -> Verdict {
        let root = Path::new("/nonexistent-cache-root");
        let ctx = Context { root, cwd: root };
        p.decide(&CommandSpec::Shell(cmd.into()), &ctx)
            .unwrap()
            .verdict
    }

    /// What an entry holds, to compare a cached policy with a parsed one.
    fn payload(p: &Policy) -> Vec<u8> {
        let d = cache_dir();
        store_as(d.path(), p, BIN);
        let bytes = fs::read(entry(d.path(), p)).unwrap();
        let nl = bytes.iter().position(|&b| b == b'\n').unwrap();
        bytes[nl + 1..].to_vec()
    }

    #[test]
    fn every_shipped_policy_comes_back_the_same_and_passes_its_examples() {
        for (name, text) in SHIPPED {
            let parsed = Policy::parse(text, name).unwrap();
            let d = cache_dir();
            store_as(d.path(), &parsed, BIN);
            let cached = load_as(d.path(), &parsed.sha256, "elsewhere.toml", BIN)
                .unwrap_or_else(|| panic!("{name}: no entry read back"));
            assert_eq!(payload(&cached), payload(&parsed), "{name}");
            assert_eq!(cached.sha256, parsed.sha256);
            assert_eq!(cached.origin, "elsewhere.toml", "origin is this call's");
            assert_eq!(cached.example_count(), parsed.example_count(), "{name}");
            check_examples(&cached, name, &cached.examples).unwrap();
        }
    }

    /// A policy read from an entry compiles no regex until one is needed;
    /// `precompile_in_background` compiles every raw pattern's on a
    /// thread, and the decisions are the same.
    #[test]
    fn regexes_compile_in_the_background() {
        let p = code();
        let d = cache_dir();
        store_as(d.path(), &p, BIN);
        let cached = load_as(d.path(), &p.sha256, "x", BIN).unwrap();
        let raw: Vec<_> = cached.engine.rules.raw_patterns().collect();
        assert!(raw.len() >= 5, "{}", raw.len());
        assert!(raw.iter().all(|r| !r.is_compiled()), "compiled on load");
        let secret = &cached.engine.secret_names;
        assert!(!secret.is_compiled(), "secret pattern compiled on load");
        // A full load compiles it at once (and reports it if invalid).
        assert!(p.engine.secret_names.is_compiled());
        cached.precompile_in_background();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !(secret.is_compiled() && raw.iter().all(|r| r.is_compiled())) {
            assert!(std::time::Instant::now() < deadline, "never compiled");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for cmd in ["sudo ls", "rm -rf /", "ls -la", "chmod 777 x"] {
            assert_eq!(verdict(&cached, cmd), verdict(&p, cmd), "{cmd}");
        }
        for name in [
            "GITHUB_TOKEN",
            "PGPASSWORD",
            "HOME",
            "LANG",
            "KEYBOARD_LAYOUT",
        ] {
            assert_eq!(
                cached.is_secret_name(name),
                p.is_secret_name(name),
                "{name}"
            );
        }
        assert!(cached.is_secret_name("AWS_SECRET_ACCESS_KEY"));
        assert!(!cached.is_secret_name("PATH"));
    }

    #[test]
    fn the_entry_is_what_is_read() {
        // An entry rewritten consistently (digest fixed up) is believed:
        // proof that a hit does not parse the policy.
        let p = code();
        let d = cache_dir();
        store_as(d.path(), &p, BIN);
        let path = entry(d.path(), &p);
        let mut c: Compiled = postcard::from_bytes(&payload(&p)).unwrap();
        c.name = "from-cache".to_string();
        rewrite(&path, &postcard::to_stdvec(&c).unwrap());
        let cached = load_as(d.path(), &p.sha256, "x", BIN).unwrap();
        assert_eq!(cached.name, "from-cache");
        // The same entry with a byte more after the value, digest fixed up
        // too: not a payload this binary wrote, so not believed.
        let mut longer = postcard::to_stdvec(&c).unwrap();
        longer.push(0);
        rewrite(&path, &longer);
        assert!(load_as(d.path(), &p.sha256, "x", BIN).is_none(), "trailing");
    }

    /// Replaces an entry's payload, with the header's digest made to match.
    fn rewrite(path: &Path, body: &[u8]) {
        let bytes = fs::read(path).unwrap();
        let nl = bytes.iter().position(|&b| b == b'\n').unwrap();
        let mut header: Header = serde_json::from_slice(&bytes[..nl]).unwrap();
        header.payload_sha256 = hex::encode(Sha256::digest(body));
        let mut out = serde_json::to_vec(&header).unwrap();
        out.push(b'\n');
        out.extend_from_slice(body);
        fs::write(path, out).unwrap();
    }

    #[test]
    fn a_damaged_or_foreign_entry_is_ignored() {
        let p = code();
        let fresh = || {
            let d = cache_dir();
            store_as(d.path(), &p, BIN);
            assert!(load_as(d.path(), &p.sha256, "x", BIN).is_some());
            d
        };
        // One byte of the payload changed (a letter of the policy's name,
        // still a valid payload): the digest no longer matches.
        let d = fresh();
        let path = entry(d.path(), &p);
        let mut bytes = fs::read(&path).unwrap();
        let nl = bytes.iter().position(|&b| b == b'\n').unwrap();
        let at = bytes[nl..]
            .windows(p.name.len())
            .position(|w| w == p.name.as_bytes())
            .unwrap()
            + nl;
        bytes[at] ^= 0x01;
        let changed: Compiled = postcard::from_bytes(&bytes[nl + 1..]).unwrap();
        assert_ne!(changed.name, p.name, "still a payload, of another name");
        fs::write(&path, bytes).unwrap();
        assert!(load_as(d.path(), &p.sha256, "x", BIN).is_none(), "tampered");
        // Truncated.
        let d = fresh();
        let path = entry(d.path(), &p);
        let len = fs::metadata(&path).unwrap().len();
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
        assert!(
            load_as(d.path(), &p.sha256, "x", BIN).is_none(),
            "truncated"
        );
        // Another binary, other policy bytes.
        let d = fresh();
        assert!(load_as(d.path(), &p.sha256, "x", "fedcba9876543210").is_none());
        let other = hex::encode(Sha256::digest(b"other bytes"));
        fs::rename(entry(d.path(), &p), entry_path(d.path(), &other, BIN)).unwrap();
        assert!(
            load_as(d.path(), &other, "x", BIN).is_none(),
            "renamed entry"
        );
        // Another format.
        let d = fresh();
        let path = entry(d.path(), &p);
        let bytes = fs::read(&path).unwrap();
        let ours = format!("{{\"format\":{FORMAT},");
        assert!(bytes.starts_with(ours.as_bytes()));
        let mut other = b"{\"format\":1,".to_vec();
        other.extend_from_slice(&bytes[ours.len()..]);
        fs::write(&path, other).unwrap();
        assert!(load_as(d.path(), &p.sha256, "x", BIN).is_none(), "format");
        // Writable by others, or a directory others may enter.
        let d = fresh();
        let path = entry(d.path(), &p);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o620)).unwrap();
        assert!(
            load_as(d.path(), &p.sha256, "x", BIN).is_none(),
            "group-writable"
        );
        let d = fresh();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
        assert!(
            load_as(d.path(), &p.sha256, "x", BIN).is_none(),
            "open directory"
        );
        // A link to an entry elsewhere.
        let d = fresh();
        let elsewhere = fresh();
        let path = entry(d.path(), &p);
        fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(entry(elsewhere.path(), &p), &path).unwrap();
        assert!(load_as(d.path(), &p.sha256, "x", BIN).is_none(), "symlink");
    }

    #[test]
    fn a_policy_edit_is_a_new_entry_and_a_new_decision() {
        let d = cache_dir();
        let file = d.path().join("policy.toml");
        let dir = d.path().join("cache");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        let base = "name = \"t\"\ndefault = \"deny\"\n\n[[rule]]\nid = \"ls\"\nprograms = [\"ls\"]\naction = \"allow\"\nrisk = \"low\"\nreason = \"lists\"\n";
        fs::write(&file, base).unwrap();
        let first = Policy::load_cached(&file, Some(&dir)).unwrap();
        assert_eq!(verdict(&first, "ls"), Verdict::Allow);
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "the full load was cached"
        );
        let again = Policy::load_cached(&file, Some(&dir)).unwrap();
        assert_eq!(verdict(&again, "ls"), Verdict::Allow);
        fs::write(&file, base.replace("\"allow\"", "\"require_approval\"")).unwrap();
        let edited = Policy::load_cached(&file, Some(&dir)).unwrap();
        assert_ne!(edited.sha256, first.sha256);
        assert_eq!(verdict(&edited, "ls"), Verdict::RequireApproval);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 2);
    }

    #[test]
    fn an_invalid_policy_is_never_cached() {
        let d = cache_dir();
        let file = d.path().join("policy.toml");
        let dir = d.path().join("cache");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        // Parses, but its example contradicts its rules.
        fs::write(
            &file,
            "name = \"t\"\ndefault = \"deny\"\n\n[[example]]\ncommand = \"ls\"\ndecision = \"allow\"\n",
        )
        .unwrap();
        assert!(Policy::load_cached(&file, Some(&dir)).is_err());
        assert!(Policy::load_cached(&file, Some(&dir)).is_err());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    }
}
