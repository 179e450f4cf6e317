//! The pure, per-request parts of the pipeline: lexing, the whole policy
//! decision against the shipped `policies/code.toml` (and its full
//! evaluation, for comparison), and encoding the `ToolResult`. These run
//! for every call an agent makes, before and after the (much larger)
//! process cost, so they must stay in the microseconds.
//!
//! `cargo bench --bench decide` measures; `cargo test --all-targets` runs
//! every case once (criterion's test mode) and checks that each command
//! still lexes and gets a decision, so a silently failing bench cannot stay
//! green.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use agent_exec::lexer::lex;
use agent_exec::policy::{Context, Policy, RiskLevel, Verdict};
use agent_exec::request::CommandSpec;
use agent_exec::result::{SCHEMA_VERSION, SandboxSummary, ToolResult};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// The commands an agent sends most, by size class. The names carry the
/// token count (words plus operators) the targets are stated in.
fn commands() -> Vec<(&'static str, String)> {
    vec![
        ("git_status_3tok", "git status --short".to_string()),
        ("cargo_test_5tok", "cargo test --lib lexer -q".to_string()),
        (
            "grep_6tok",
            "grep -rn TODO src --include '*.rs'".to_string(),
        ),
        ("pipeline_40tok", pipeline_40()),
        ("heredoc_4kib", heredoc_4k()),
    ]
}

/// A search-and-summarise chain of the kind agents write to survey a
/// repository: pipes, `&&`, quoting, a glob and a redirection.
fn pipeline_40() -> String {
    "grep -rn 'fn main' src --include '*.rs' | sort | uniq -c | sort -rn | head -20 \
     && git log --oneline -n 5 \
     && find . -name '*.toml' -type f -newer Cargo.toml | sort | wc -l | tail -n 1"
        .to_string()
}

/// An agent writing a file with a quoted heredoc: one small command whose
/// cost is dominated by scanning the body.
fn heredoc_4k() -> String {
    let mut body = String::with_capacity(4200);
    let line = "Some notes on the change: the lexer keeps spans, the policy decides.\n";
    while body.len() + line.len() <= 4096 {
        body.push_str(line);
    }
    format!("cat > NOTES.md <<'EOF'\n{body}EOF\n")
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load_policy() -> Policy {
    let path = manifest_dir().join("policies").join("code.toml");
    match Policy::load(&path) {
        Ok(p) => p,
        Err(e) => panic!("bench needs the shipped policy {}: {e}", path.display()),
    }
}

/// The repository itself is the root: a real tree, so paths that exist get
/// canonicalized exactly as they would for an agent working on a project.
fn project_root() -> PathBuf {
    match manifest_dir().canonicalize() {
        Ok(p) => p,
        Err(e) => panic!("cannot canonicalize the crate directory: {e}"),
    }
}

fn bench_lex(c: &mut Criterion) {
    let mut group = c.benchmark_group("lex");
    for (name, text) in commands() {
        if let Err(e) = lex(&text) {
            panic!("{name} does not lex: {e}");
        }
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(name, |b| b.iter(|| lex(black_box(&text))));
    }
    group.finish();
}

fn bench_decide(c: &mut Criterion) {
    let policy = load_policy();
    let root = project_root();
    let ctx = Context {
        root: &root,
        cwd: &root,
    };
    let mut group = c.benchmark_group("decide");
    for (name, text) in commands() {
        // The request is built outside the timed loop, as the service gets
        // it already validated; the decision itself lexes.
        let spec = CommandSpec::Shell(text);
        match policy.decide(&spec, &ctx) {
            // Every case is one an agent gets allowed: a refusal can stop
            // the walk early and would flatter the numbers.
            Ok(d) if d.verdict == Verdict::Allow => {}
            Ok(d) => panic!(
                "{name} is not allowed ({:?} by {}: {})",
                d.verdict, d.rule, d.reason
            ),
            Err(e) => panic!("{name} gets no decision: {e}"),
        }
        group.bench_function(name, |b| {
            b.iter(|| policy.decide(black_box(&spec), black_box(&ctx)))
        });
    }
    // The CLI's `-- /bin/true` path: an argv, no lexing.
    let argv = CommandSpec::Argv(vec!["/bin/true".to_string()]);
    if let Err(e) = policy.decide(&argv, &ctx) {
        panic!("argv /bin/true gets no decision: {e}");
    }
    group.bench_function("argv_bin_true", |b| {
        b.iter(|| policy.decide(black_box(&argv), black_box(&ctx)))
    });
    group.finish();
}

/// The full evaluation (every finding kept, each described) of the same
/// requests: what an explanation costs over the bare decision.
fn bench_evaluate(c: &mut Criterion) {
    let policy = load_policy();
    let root = project_root();
    let ctx = Context {
        root: &root,
        cwd: &root,
    };
    let mut group = c.benchmark_group("evaluate");
    for (name, text) in commands() {
        let spec = CommandSpec::Shell(text);
        match (policy.evaluate(&spec, &ctx), policy.decide(&spec, &ctx)) {
            (Ok(e), Ok(d)) if e.decision() == d => {}
            (e, d) => panic!("{name}: evaluate gives {e:?}, decide {d:?}"),
        }
        group.bench_function(name, |b| {
            b.iter(|| policy.evaluate(black_box(&spec), black_box(&ctx)))
        });
    }
    group.finish();
}

/// What `cargo test` typically returns to an agent: the kept head and tail
/// of a long stdout, a short stderr and a full sandbox summary.
fn realistic_result() -> ToolResult {
    let mut stdout = String::with_capacity(8200);
    let mut i = 0;
    while stdout.len() < 8000 {
        stdout.push_str(&format!("test policy::engine::tests::case_{i:04} ... ok\n"));
        i += 1;
    }
    let stderr = "   Compiling agent-exec v0.1.0\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 4.20s\n     Running unittests src/lib.rs\n\"quoted\" \\ and a tab\there\n".to_string();
    ToolResult {
        schema_version: SCHEMA_VERSION,
        id: Some(serde_json::json!(42)),
        call_id: "c-7f3a9e12b4d04c1e".to_string(),
        ok: true,
        exit_code: Some(0),
        signal: None,
        duration_ms: 4213,
        stdout_bytes: 183_412,
        stderr_bytes: stderr.len() as u64,
        stdout,
        stderr,
        stdout_truncated: true,
        stderr_truncated: false,
        error_type: None,
        message: String::new(),
        recoverable: false,
        suggestion: None,
        policy_decision: Some(Verdict::Allow),
        risk_level: Some(RiskLevel::Low),
        risk_reason: Some("cargo test only builds and runs the project's own tests".to_string()),
        matched_rule: Some("cargo-build".to_string()),
        decided_by: Some("cargo".to_string()),
        approval_required: false,
        approved: None,
        approval_id: None,
        approval_expires_at: None,
        env_scrubbed: vec![
            "AWS_SECRET_ACCESS_KEY".to_string(),
            "GITHUB_TOKEN".to_string(),
        ],
        sandbox: Some(SandboxSummary {
            landlock_abi: 7,
            landlock: "full".to_string(),
            seccomp: true,
            no_new_privs: true,
            network: "none".to_string(),
            uid: 65534,
            gid: 65534,
            limits: vec![
                "rlimit_nofile=1024".to_string(),
                "rlimit_nproc=512".to_string(),
                "cgroup_pids_max=256".to_string(),
            ],
            not_applied: Vec::new(),
            warnings: Vec::new(),
        }),
        duplicate: false,
        provenance: Vec::new(),
    }
}

fn bench_result(c: &mut Criterion) {
    let full = realistic_result();
    let small = ToolResult::refusal(
        "c-1",
        agent_exec::result::ErrorType::PermissionDenied,
        "rm -rf / is refused by rule deny-rm-root",
    );
    let mut group = c.benchmark_group("tool_result");
    for (name, result) in [("cargo_test_8k", &full), ("refusal", &small)] {
        let encoded = match serde_json::to_string(result) {
            Ok(s) => s,
            Err(e) => panic!("{name} does not serialize: {e}"),
        };
        group.throughput(Throughput::Bytes(encoded.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| serde_json::to_string(black_box(result)))
        });
    }
    group.finish();
}

/// Argument provenance on top of the decision: the decision with the
/// request's path arguments collected by the same walk, then tagged
/// against the session's ledger, empty and holding about 10,000 entries.
/// `decide_only` is the same command's bare decision, the same-run
/// baseline.
fn bench_provenance(c: &mut Criterion) {
    use agent_exec::policy::{ProvenanceMode, ProvenancePolicy};
    use agent_exec::provenance::Provenance;
    use agent_exec::request::SessionId;

    let policy = load_policy();
    let root = project_root();
    let ctx = Context {
        root: &root,
        cwd: &root,
    };
    // Five tokens, two of them paths (the script is free text).
    let spec = CommandSpec::Shell("sed -i s/foo/bar/ src/lib.rs src/main.rs".to_string());
    let settings = ProvenancePolicy {
        mode: ProvenanceMode::Tag,
        ..ProvenancePolicy::default()
    };
    let session = SessionId::new(1000, None);
    let empty = Provenance::new(&settings, None).unwrap_or_else(|| panic!("provenance is off"));
    let full = Provenance::new(&settings, None).unwrap_or_else(|| panic!("provenance is off"));
    // What `find src` over a large tree shows: 98 directories of 99 files,
    // about 10,000 entries with the directories and their listings.
    let mut listing = String::new();
    for d in 0..98 {
        for f in 0..99 {
            listing.push_str(&format!("src/m{d}/f{f}.rs\n"));
        }
    }
    listing.push_str("src/lib.rs\n");
    let mut shown = ToolResult::success("c-find");
    shown.exit_code = Some(0);
    shown.stdout = listing;
    let find = CommandSpec::Shell("find src".to_string());
    full.record(&session, &root, &root, &find, &[], &shown);
    let entries = full.entries(&session);
    assert!(
        (9_000..=10_000).contains(&entries),
        "{entries} ledger entries"
    );

    let mut group = c.benchmark_group("provenance");
    group.bench_function("sed_5tok_decide_only", |b| {
        b.iter(|| policy.decide(black_box(&spec), black_box(&ctx)))
    });
    for (name, p) in [
        ("sed_5tok_empty_ledger", &empty),
        ("sed_5tok_10k_ledger", &full),
    ] {
        let (decision, args) = match policy.decide_with_paths(&spec, &ctx) {
            Ok(d) => d,
            Err(e) => panic!("{name} gets no decision: {e}"),
        };
        assert_eq!(Ok(&decision), policy.decide(&spec, &ctx).as_ref());
        let tags = p.tag(&session, &root, &args);
        assert_eq!(tags.len(), 2, "{name}: {tags:?}");
        // The tagging alone, on arguments already collected.
        group.bench_function(format!("{name}_tag_only"), |b| {
            b.iter(|| p.tag(&session, &root, black_box(&args)))
        });
        group.bench_function(name, |b| {
            b.iter(|| {
                let (d, args) = policy
                    .decide_with_paths(black_box(&spec), black_box(&ctx))
                    .unwrap_or_else(|e| panic!("{e}"));
                (d, p.tag(&session, &root, &args))
            })
        });
    }
    group.finish();
}

fn config() -> Criterion {
    // Shorter than criterion's default so the whole file measures in about
    // a minute on a small machine; many samples keep the median stable.
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(60)
}

/// What a one-shot CLI call pays to get its policy: `load_cached` with a
/// warm entry (the usual call) against the full load it replaces (parse,
/// compile every regex, check every example: the first call with these
/// bytes and this binary). Both cases must come back
/// with the same decisions, so a cache that silently misses or changes a
/// decision fails here too.
fn bench_load(c: &mut Criterion) {
    use std::os::unix::fs::PermissionsExt;
    let path = manifest_dir().join("policies").join("code.toml");
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("no temporary directory: {e}"),
    };
    if let Err(e) = std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)) {
        panic!("cannot make the cache directory private: {e}");
    }
    let full = load_policy();
    let cached = match Policy::load_cached(&path, Some(dir.path()))
        .and_then(|_| Policy::load_cached(&path, Some(dir.path())))
    {
        Ok(p) => p,
        Err(e) => panic!("cached load failed: {e}"),
    };
    let hit = std::fs::read_dir(dir.path()).map_or(0, Iterator::count);
    assert_eq!(hit, 1, "the first load did not write an entry");
    let root = project_root();
    let ctx = Context {
        root: &root,
        cwd: &root,
    };
    for (name, text) in commands() {
        let spec = CommandSpec::Shell(text);
        let (a, b) = (full.decide(&spec, &ctx), cached.decide(&spec, &ctx));
        match (a, b) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{name}: the cached policy decides otherwise"),
            (a, b) => panic!("{name}: {a:?} / {b:?}"),
        }
    }
    let mut group = c.benchmark_group("load");
    group.bench_function("code_toml_cached", |b| {
        b.iter(|| Policy::load_cached(black_box(&path), Some(dir.path())))
    });
    group.bench_function("code_toml_full", |b| {
        b.iter(|| Policy::load(black_box(&path)))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_lex, bench_decide, bench_evaluate, bench_result, bench_provenance, bench_load
}
criterion_main!(benches);
