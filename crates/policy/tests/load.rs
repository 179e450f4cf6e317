//! Loading is strict: every malformed or contradictory policy is refused
//! with a message naming the file, the line and the key.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use agent_exec_policy::{Policy, PolicyError, resolve_program};
use sha2::{Digest, Sha256};

/// The policies the project ships, at the workspace root.
const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");

/// A minimal valid policy; tests append to it.
const BASE: &str = r#"name = "t"
default = "deny"

[[rule]]
id = "ls"
action = "allow"
program = "ls"
read_only = true
risk = "low"
reason = "Lists files."

[[example]]
command = "ls"
decision = "allow"
"#;

fn err(text: &str) -> String {
    match Policy::parse(text, "t.toml") {
        Ok(_) => panic!("policy unexpectedly loaded:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn base_policy_loads_and_hashes_its_bytes() {
    let p = Policy::parse(BASE, "t.toml").unwrap();
    assert_eq!(p.sha256, hex::encode(Sha256::digest(BASE.as_bytes())));
    assert_eq!(p.example_count(), 1);
    assert_eq!(p.name, "t");
}

#[test]
fn unknown_top_level_key_names_line_and_key() {
    let text = format!("{BASE}\ncolour = \"red\"\n");
    let msg = err(&text);
    let line = line_of(&text, "colour");
    assert!(msg.starts_with(&format!("t.toml:{line}:")), "{msg}");
    assert!(msg.contains("colour"), "{msg}");
}

#[test]
fn unknown_key_in_a_table_names_line_and_key() {
    let text = format!("{BASE}\n[limits]\ntimeout_ms = 5\ntimout = 3\n");
    let msg = err(&text);
    assert!(
        msg.starts_with(&format!("t.toml:{}:", line_of(&text, "timout ="))),
        "{msg}"
    );
    assert!(msg.contains("timout"), "{msg}");
}

#[test]
fn unknown_key_in_a_rule_names_line_and_key() {
    let text = BASE.replace("read_only = true", "read_only = true\nprogam = \"x\"");
    let msg = err(&text);
    assert!(
        msg.starts_with(&format!("t.toml:{}:", line_of(&text, "progam"))),
        "{msg}"
    );
    assert!(msg.contains("progam"), "{msg}");
}

#[test]
fn wrong_type_is_refused_with_its_line() {
    let text = format!("{BASE}\n[limits]\ntimeout_ms = \"ten\"\n");
    let msg = err(&text);
    assert!(
        msg.starts_with(&format!("t.toml:{}:", line_of(&text, "\"ten\""))),
        "{msg}"
    );
}

#[test]
fn bad_verdict_is_refused() {
    let msg = err(&BASE.replace("default = \"deny\"", "default = \"maybe\""));
    assert!(msg.starts_with("t.toml:2:"), "{msg}");
}

#[test]
fn missing_required_key_is_refused() {
    let msg = err(&BASE.replace("reason = \"Lists files.\"", ""));
    assert!(msg.contains("reason"), "{msg}");
}

#[test]
fn bad_regex_names_line_and_key() {
    let text = format!(
        "{BASE}\n[[rule]]\nid = \"bad\"\naction = \"deny\"\npattern = 'curl(('\nrisk = \"high\"\nreason = \"x\"\n"
    );
    let msg = err(&text);
    assert!(
        msg.contains(&format!("t.toml:{}:", line_of(&text, "curl(("))),
        "{msg}"
    );
    assert!(msg.contains("pattern") && msg.contains("bad"), "{msg}");

    let text = format!(
        "{BASE}\n[[rule]]\nid = \"bad2\"\naction = \"deny\"\nprogram = \"sed\"\nargs_regex = '[x'\nrisk = \"high\"\nreason = \"x\"\n"
    );
    let msg = err(&text);
    assert!(
        msg.contains(&format!("t.toml:{}:", line_of(&text, "'[x'"))),
        "{msg}"
    );
    assert!(msg.contains("args_regex"), "{msg}");
}

#[test]
fn bad_secret_pattern_is_refused() {
    let msg = err(&format!("{BASE}\n[env]\nsecret_pattern = '(('\n"));
    assert!(msg.contains("secret_pattern"), "{msg}");
}

#[test]
fn duplicate_rule_ids_are_refused() {
    let text = format!(
        "{BASE}\n[[rule]]\nid = \"ls\"\naction = \"allow\"\nprogram = \"cat\"\nrisk = \"low\"\nreason = \"x\"\n"
    );
    let msg = err(&text);
    assert!(msg.contains("duplicate rule id"), "{msg}");
    assert!(
        msg.contains("line 5"),
        "names where the first one is: {msg}"
    );
}

#[test]
fn contradictory_rules_are_refused() {
    let text = format!(
        "{BASE}\n[[rule]]\nid = \"no-ls\"\naction = \"deny\"\nprogram = \"ls\"\nrisk = \"low\"\nreason = \"x\"\n"
    );
    let msg = err(&text);
    assert!(msg.contains("contradicts rule `ls`"), "{msg}");

    let sub = "[[rule]]\nid = \"git-a\"\naction = \"allow\"\nprogram = \"git\"\nsubcommands = [\"status\", \"log\"]\nrisk = \"low\"\nreason = \"x\"\n\
               [[rule]]\nid = \"git-b\"\naction = \"require_approval\"\nprogram = \"git\"\nsubcommands = [\"log\"]\nrisk = \"low\"\nreason = \"x\"\n";
    let msg = err(&format!("{BASE}\n{sub}"));
    assert!(msg.contains("git log"), "{msg}");
}

#[test]
fn distinct_conditions_are_not_contradictions() {
    let text = format!(
        "{BASE}\n[[rule]]\nid = \"ls-recursive\"\naction = \"deny\"\nprogram = \"ls\"\noptions = [\"-R\"]\nrisk = \"low\"\nreason = \"x\"\n\
         [[example]]\ncommand = \"ls -laR\"\ndecision = \"deny\"\nrule = \"ls-recursive\"\n"
    );
    let p = Policy::parse(&text, "t.toml").unwrap();
    assert_eq!(p.example_count(), 2);
}

#[test]
fn malformed_rules_are_refused() {
    let cases = [
        (
            "action = \"allow\"\npattern = 'x'",
            "only deny or require approval",
        ),
        ("action = \"deny\"", "needs `program`"),
        (
            "action = \"deny\"\nprogram = \"x\"\npattern = 'x'",
            "cannot also name programs",
        ),
        (
            "action = \"deny\"\nprogram = \"x\"\noptions = [\"exec\"]",
            "is not an option",
        ),
        (
            "action = \"deny\"\nprogram = \"x\"\nread_only = true",
            "only apply to allow rules",
        ),
        (
            "action = \"allow\"\nprogram = \"x\"\nsubcommands = [\"a\"]\nprefix = [\"b\"]",
            "not both",
        ),
    ];
    for (body, expect) in cases {
        let text =
            format!("{BASE}\n[[rule]]\nid = \"r\"\n{body}\nrisk = \"low\"\nreason = \"x\"\n");
        let msg = err(&text);
        assert!(msg.contains(expect), "expected `{expect}` in: {msg}");
        assert!(msg.contains("rule r"), "{msg}");
    }
    let msg = err(&BASE.replace("id = \"ls\"", "id = \"builtin:ls\""));
    assert!(msg.contains("reserved"), "{msg}");
}

#[test]
fn shell_check_is_refused_where_it_cannot_apply() {
    let msg = err(&format!("{BASE}\n[shell]\nprogram_expansion = \"check\"\n"));
    assert!(msg.contains("shell.program_expansion"), "{msg}");
    let msg = err(&format!("{BASE}\n[shell]\nmax_nesting = 0\n"));
    assert!(msg.contains("max_nesting"), "{msg}");
    let msg = err(&format!("{BASE}\n[shell]\nglobbing = \"check\"\n"));
    assert!(msg.contains("globbing"), "{msg}");
}

#[test]
fn failing_examples_refuse_load_and_are_all_listed() {
    let text = format!(
        "{BASE}\n[[example]]\ncommand = \"cat /etc/passwd\"\ndecision = \"allow\"\n\
         [[example]]\ncommand = \"ls\"\ndecision = \"allow\"\nrule = \"other\"\n\
         [[example]]\ncommand = \"ls > x\"\ndecision = \"allow\"\nread_only = true\n\
         [[example]]\ncommand = \"echo 'open\"\ndecision = \"deny\"\n"
    );
    let e = Policy::parse(&text, "t.toml").unwrap_err();
    let PolicyError::Examples { failures, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(failures.len(), 4, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("4 example(s)"), "{msg}");
    assert!(
        msg.contains("`cat /etc/passwd`: expected allow, got deny by rule `builtin:path-escape`"),
        "{msg}"
    );
    assert!(
        msg.contains("expected allow by rule `other`, got allow by rule `ls`"),
        "{msg}"
    );
    assert!(
        msg.contains("expected allow, read-only, got allow by rule `ls`, mutating"),
        "{msg}"
    );
    assert!(msg.contains("parse error"), "{msg}");
    let line = line_of(&text, "cat /etc/passwd") - 1;
    assert!(
        msg.contains(&format!("t.toml:{line}: `cat /etc/passwd`")),
        "{msg}"
    );
}

#[test]
fn missing_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.toml");
    let e = Policy::load(&path).unwrap_err();
    assert!(matches!(e, PolicyError::NotFound { .. }));
    assert_eq!(
        e.to_string(),
        format!("policy file {} does not exist", path.display())
    );
}

#[test]
fn load_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    std::fs::write(&path, format!("{BASE}\nbogus = 1\n")).unwrap();
    let msg = Policy::load(&path).unwrap_err().to_string();
    assert!(msg.starts_with(&format!("{}:", path.display())), "{msg}");

    std::fs::write(&path, BASE).unwrap();
    let p = Policy::load(&path).unwrap();
    assert_eq!(p.origin, path.display().to_string());
    assert_eq!(p.sha256, hex::encode(Sha256::digest(BASE.as_bytes())));
}

#[test]
fn lint_reports_shadowed_and_unresolvable_rules() {
    let text = format!(
        "{BASE}\n[env]\npath = \"/usr/bin:/bin:relative\"\n\
         [[rule]]\nid = \"ghost\"\naction = \"allow\"\nprogram = \"no-such-program-xyz\"\nrisk = \"low\"\nreason = \"x\"\n\
         [[rule]]\nid = \"git-log\"\naction = \"allow\"\nprogram = \"git\"\nsubcommands = [\"log\"]\nrisk = \"low\"\nreason = \"x\"\n\
         [[rule]]\nid = \"no-git\"\naction = \"deny\"\nprogram = \"git\"\nrisk = \"low\"\nreason = \"x\"\n"
    );
    let p = Policy::parse(&text, "t.toml").unwrap();
    let lint = p.lint();
    assert!(
        lint.iter()
            .any(|w| w.contains("no-such-program-xyz") && w.contains("does not resolve")),
        "{lint:?}"
    );
    assert!(
        lint.iter()
            .any(|w| w.contains("`git-log` never decides") && w.contains("no-git")),
        "{lint:?}"
    );
    assert!(lint.iter().any(|w| w.contains("`relative`")), "{lint:?}");
    assert!(!lint.iter().any(|w| w.contains("rule `ls`")), "{lint:?}");
}

#[test]
fn lint_reports_option_looking_subcommands() {
    let text = format!(
        "{BASE}\n[[rule]]\nid = \"cargo\"\naction = \"allow\"\nprogram = \"cargo\"\nsubcommands = [\"build\", \"--version\"]\nrisk = \"low\"\nreason = \"x\"\n"
    );
    let p = Policy::parse(&text, "t.toml").unwrap();
    let lint = p.lint();
    assert!(
        lint.iter().any(|w| w.contains("rule `cargo`")
            && w.contains("`--version`")
            && w.contains("prefix")),
        "{lint:?}"
    );
    // The rule as written never matches `cargo --version`.
    let root = std::path::Path::new("/nonexistent-root");
    let ctx = agent_exec_policy::Context { root, cwd: root };
    let d = p
        .decide(
            &agent_exec_policy::CommandSpec::Shell("cargo --version".into()),
            &ctx,
        )
        .unwrap();
    assert_ne!(d.rule, "cargo");
}

#[test]
fn shipped_policies_lint_without_shadowed_rules() {
    let dir = Path::new(POLICIES);
    for name in ["code.toml", "readonly.toml", "ci.toml"] {
        let p = Policy::load(&dir.join(name)).unwrap();
        let shadowed: Vec<String> = p
            .lint()
            .into_iter()
            .filter(|w| w.contains("never decides") || w.contains("never matches"))
            .collect();
        assert!(shadowed.is_empty(), "{name}: {shadowed:?}");
    }
}

#[test]
fn resolve_program_follows_path_order_and_skips_relative_entries() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("tool"), "#!/bin/sh\n").unwrap();
    std::fs::write(b.join("tool"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(a.join("tool"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(b.join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("relative:{}:{}", a.display(), b.display());
    // Not executable in `a`, so `b` wins.
    assert_eq!(resolve_program("tool", &path), Some(b.join("tool")));
    assert_eq!(resolve_program("missing", &path), None);
    assert_eq!(
        resolve_program("b/tool", &path),
        None,
        "names with `/` are not looked up"
    );
    assert_eq!(resolve_program("", &path), None);
    std::fs::create_dir_all(dir.path().join("relative")).unwrap();
    assert_eq!(resolve_program("tool", "relative"), None);
}

/// The entry a full load leaves in the cache dir (exactly one).
fn only_marker(dir: &Path) -> String {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].clone()
}

#[test]
fn a_full_load_is_cached_per_policy_bytes_and_binary() {
    let memo = tempfile::tempdir().unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), BASE).unwrap();
    let p = Policy::load_cached(file.path(), Some(memo.path())).unwrap();
    let marker = only_marker(memo.path());
    let sha = hex::encode(Sha256::digest(BASE.as_bytes()));
    assert!(marker.starts_with(&format!("{sha}-")), "{marker}");
    assert_eq!(p.sha256, sha);
    // The same bytes again: read from the entry, which stays as it was.
    let bytes = std::fs::read(memo.path().join(&marker)).unwrap();
    let again = Policy::load_cached(file.path(), Some(memo.path())).unwrap();
    assert_eq!(only_marker(memo.path()), marker);
    assert_eq!(std::fs::read(memo.path().join(&marker)).unwrap(), bytes);
    assert_eq!(again.sha256, sha);
}

#[test]
fn failing_examples_are_never_cached() {
    let memo = tempfile::tempdir().unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    let bad = format!("{BASE}\n[[example]]\ncommand = \"rm x\"\ndecision = \"allow\"\n");
    std::fs::write(file.path(), &bad).unwrap();
    for _ in 0..2 {
        let e = match Policy::load_cached(file.path(), Some(memo.path())) {
            Ok(_) => panic!("a policy whose example fails must not load"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("rm x"), "{e}");
    }
    assert_eq!(std::fs::read_dir(memo.path()).unwrap().count(), 0);
}

#[test]
fn a_planted_entry_does_not_skip_the_example_check() {
    // Learn this binary's entry suffix from a good policy, then plant
    // entries for a policy whose example fails: an empty file (what the
    // earlier marker was) and the good policy's entry under the bad
    // policy's name. Neither names the bad bytes with a matching digest,
    // so both are ignored and the full load refuses.
    let memo = tempfile::tempdir().unwrap();
    let good = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(good.path(), BASE).unwrap();
    Policy::load_cached(good.path(), Some(memo.path())).unwrap();
    let marker = only_marker(memo.path());
    let suffix = marker.split_once('-').unwrap().1.to_string();

    let bad_text = format!("{BASE}\n[[example]]\ncommand = \"rm x\"\ndecision = \"allow\"\n");
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), &bad_text).unwrap();
    let bad_sha = hex::encode(Sha256::digest(bad_text.as_bytes()));
    let planted = memo.path().join(format!("{bad_sha}-{suffix}"));
    std::fs::write(&planted, b"").unwrap();
    assert!(Policy::load_cached(bad.path(), Some(memo.path())).is_err());
    std::fs::copy(memo.path().join(&marker), &planted).unwrap();
    assert!(Policy::load_cached(bad.path(), Some(memo.path())).is_err());
    assert!(Policy::load(bad.path()).is_err());
}

#[test]
fn a_cached_policy_decides_like_a_fully_loaded_one() {
    use agent_exec_policy::CommandSpec;
    use agent_exec_policy::Context;
    let path = Path::new(POLICIES).join("code.toml");
    let memo = tempfile::tempdir().unwrap();
    let full = Policy::load(&path).unwrap();
    Policy::load_cached(&path, Some(memo.path())).unwrap();
    // Second load: from the entry, regexes compiled lazily on first use.
    let lazy = Policy::load_cached(&path, Some(memo.path())).unwrap();
    let root = tempfile::tempdir().unwrap();
    let ctx = Context {
        root: root.path(),
        cwd: root.path(),
    };
    for cmd in [
        "git status --short",
        "sudo ls",
        "ls; curl http://127.0.0.1/",
        "rm -rf /",
        "chmod 777 x",
        "echo hi > /dev/sda",
        "sed -i 's/a/b/e' f.txt",
        "sed -n 's/a/b/w /tmp/x' f.txt",
        "awk '{system(\"id\")}' f.txt",
        "cat /etc/passwd",
        "grep -rn TODO src",
        "python3 -c pass",
    ] {
        let spec = CommandSpec::Shell(cmd.to_string());
        let a = full.decide(&spec, &ctx).unwrap();
        let b = lazy.decide(&spec, &ctx).unwrap();
        assert_eq!(
            (a.verdict, &a.rule, &a.token),
            (b.verdict, &b.rule, &b.token),
            "{cmd}"
        );
    }
}

#[test]
fn entries_of_other_binaries_are_dropped_once_they_pile_up() {
    let memo = tempfile::tempdir().unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), BASE).unwrap();
    for i in 0..40 {
        std::fs::write(memo.path().join(format!("{i:064x}-{:016x}", i + 1)), b"").unwrap();
    }
    Policy::load_cached(file.path(), Some(memo.path())).unwrap();
    let sha = hex::encode(Sha256::digest(BASE.as_bytes()));
    let left: Vec<String> = std::fs::read_dir(memo.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with(&sha));
}

#[test]
fn unicode_classes_are_refused_in_policy_regexes() {
    let text = format!(
        "{BASE}\n[[rule]]\nid = \"u\"\naction = \"deny\"\nrisk = \"high\"\nreason = \"r\"\npattern = '\\p{{L}}x'\n"
    );
    let e = err(&text);
    assert!(e.contains("rule u: pattern"), "{e}");
}

#[test]
fn syntax_errors_keep_what_the_parser_said_as_their_source() {
    use std::error::Error;

    let e = Policy::parse("name = \"t\"\ndefault = \"deny\"\n[[rule]\n", "t.toml").unwrap_err();
    assert!(matches!(e, PolicyError::Syntax { line: 3, .. }), "{e:?}");
    let source = e.source().expect("the TOML parser's error");
    assert!(
        source.downcast_ref::<toml::de::Error>().is_some(),
        "{source:?}"
    );

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), b"name = \"\xff\"\n").unwrap();
    let e = Policy::load(file.path()).unwrap_err();
    assert!(e.to_string().contains("not valid UTF-8"), "{e}");
    let source = e.source().expect("the UTF-8 decoder's error");
    assert!(
        source.downcast_ref::<std::str::Utf8Error>().is_some(),
        "{source:?}"
    );
}

#[test]
fn sandbox_require_sets_per_layer_levels_and_refuses_unknown_ones() {
    use agent_exec_policy::{DEFAULT_MEMORY_MAX_BYTES, Enforcement, Requirement};
    let p = Policy::parse(BASE, "t.toml").unwrap();
    assert_eq!(p.sandbox.enforcement, Enforcement::Strict);
    assert_eq!(p.sandbox.require, Default::default());
    // A run has a memory cap unless the policy says otherwise.
    assert_eq!(p.sandbox.memory_max_bytes, DEFAULT_MEMORY_MAX_BYTES);
    assert_eq!(DEFAULT_MEMORY_MAX_BYTES, 4 << 30);

    let text = format!(
        "{BASE}\n[sandbox]\nenforcement = \"best_effort\"\n\
         [sandbox.require]\nlandlock = \"required\"\ncgroup_memory = \"required\"\n\
         seccomp = \"off\"\nlandlock_scopes = \"best_effort\"\n"
    );
    let p = Policy::parse(&text, "t.toml").unwrap();
    let r = p.sandbox.require;
    assert_eq!(r.landlock, Some(Requirement::Required));
    assert_eq!(r.cgroup_memory, Some(Requirement::Required));
    assert_eq!(r.seccomp, Some(Requirement::Off));
    assert_eq!(r.landlock_scopes, Some(Requirement::BestEffort));
    assert_eq!(
        (r.cgroup, r.cgroup_pids, r.landlock_net),
        (None, None, None)
    );

    for bad in [
        "[sandbox.require]\nlandlock_refer = \"required\"\n",
        "[sandbox.require]\nseccomp = \"strict\"\n",
    ] {
        let text = format!("{BASE}\n{bad}");
        let msg = err(&text);
        let line = text.lines().count();
        assert!(msg.starts_with(&format!("t.toml:{line}:")), "{msg}");
    }
}

#[test]
fn a_wildcard_keep_never_passes_a_secret_looking_name() {
    use agent_exec_policy::EnvFate;
    // A custom secret pattern that knows nothing of tokens.
    let text = format!(
        "{BASE}\n[env]\nkeep = [\"LC_*\", \"TERM\", \"MY_SESSION_DIR\"]\nsecret_pattern = \"^OPENAI_\"\n"
    );
    let p = Policy::parse(&text, "t.toml").unwrap();
    assert_eq!(p.env_fate("LC_ALL"), EnvFate::Pass);
    assert_eq!(p.env_fate("LC_API_TOKEN"), EnvFate::Secret);
    assert_eq!(p.env_fate("lc_db_Password"), EnvFate::Drop);
    assert_eq!(p.env_fate("LC_db_Password"), EnvFate::Secret);
    assert_eq!(p.env_fate("OPENAI_X"), EnvFate::Secret);
    assert_eq!(p.env_fate("TERM"), EnvFate::Pass);
    assert_eq!(p.env_fate("HOME_X"), EnvFate::Drop);
    // Named in full: the operator's explicit choice, held to the
    // policy's own pattern only.
    assert_eq!(p.env_fate("MY_SESSION_DIR"), EnvFate::Pass);

    // The default pattern withholds every secret-looking name, kept or not.
    let p = Policy::parse(BASE, "t.toml").unwrap();
    assert_eq!(p.env_fate("LC_API_TOKEN"), EnvFate::Secret);
    assert_eq!(p.env_fate("GITHUB_TOKEN"), EnvFate::Secret);
    assert_eq!(p.env_fate("LC_TIME"), EnvFate::Pass);
    assert_eq!(p.env_fate("LANG"), EnvFate::Pass);
    assert_eq!(p.env_fate("EDITOR"), EnvFate::Drop);
}
