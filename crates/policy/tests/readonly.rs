//! What a command the policy classes read-only may be given: each
//! program's options, operands and scripts (the built-in tool profiles),
//! words the shell may turn into options, and the safe-mode flags the
//! policy injects (`sed --sandbox`, `gawk --sandbox`) with where they go.

use std::path::{Path, PathBuf};

use agent_exec_policy::{CommandSpec, Context, Decision, InjectedFlag, Policy, Verdict};
use proptest::prelude::*;

const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");
const SHIPPED: [&str; 3] = ["readonly", "ci", "code"];
const TOOL: &str = "builtin:read-only-tool";

fn load(name: &str) -> Policy {
    Policy::load(&Path::new(POLICIES).join(format!("{name}.toml"))).unwrap()
}

fn decide_in(policy: &Policy, root: &Path, spec: &CommandSpec) -> Decision {
    let ctx = Context { root, cwd: root };
    let decided = policy.decide(spec, &ctx).unwrap();
    let evaluated = policy.evaluate(spec, &ctx).unwrap();
    assert_eq!(evaluated.decision(), decided, "{spec:?}");
    assert_eq!(evaluated.injected(), decided.injected.as_slice());
    decided
}

fn decide(policy: &Policy, cmd: &str) -> Decision {
    decide_in(
        policy,
        Path::new(agent_exec_policy::EXAMPLE_ROOT),
        &CommandSpec::Shell(cmd.to_string()),
    )
}

/// A policy that allows every profiled program read-only and has no rule
/// of its own against any option: what it refuses, the profiles refuse.
fn bare() -> Policy {
    Policy::parse(
        r#"
name = "bare"
default = "deny"
[[rule]]
id = "search"
programs = ["grep", "rg", "sed", "awk", "gawk", "mawk"]
pattern_operand = true
action = "allow"
risk = "low"
read_only = true
reason = "Searches."
[[rule]]
id = "read"
programs = ["sort", "tree", "uniq", "file", "less", "man", "xxd", "find", "git", "cat"]
action = "allow"
risk = "low"
read_only = true
reason = "Reads."
"#,
        "bare.toml",
    )
    .unwrap()
}

/// Refused by a tool profile, naming `token` (as the decision's token and
/// in its reason).
fn refused(cmd: &str, token: &str) {
    let d = decide(&bare(), cmd);
    assert_eq!(
        (d.verdict, d.rule.as_str(), d.token.as_deref()),
        (Verdict::Deny, TOOL, Some(token)),
        "{cmd}: {d:?}"
    );
    assert!(d.reason.contains(token), "{cmd}: {}", d.reason);
    assert!(!d.read_only);
}

fn not_refused(cmd: &str) {
    let d = decide(&bare(), cmd);
    assert_eq!(d.verdict, Verdict::Allow, "{cmd}: {d:?}");
    assert!(d.read_only, "{cmd}: {d:?}");
}

fn allowed_read_only(policy: &Policy, cmd: &str) -> Decision {
    let d = decide(policy, cmd);
    assert_eq!(d.verdict, Verdict::Allow, "{}: {cmd}: {d:?}", policy.name);
    assert!(d.read_only, "{}: {cmd}: {d:?}", policy.name);
    d
}

#[test]
fn the_reported_bypasses_are_refused_by_every_shipped_policy() {
    for name in SHIPPED {
        let p = load(name);
        for cmd in [
            "sort --compress-program=sh f",
            "tree -o out",
            "xxd -r f",
            "awk '{ print \"}\" > \"f2\" }' f",
            "rg TODO *",
        ] {
            let d = decide(&p, cmd);
            assert_eq!(d.verdict, Verdict::Deny, "{name}: {cmd}: {d:?}");
        }
    }
}

#[test]
fn options_that_run_programs_or_write_files_are_refused_by_name() {
    for (cmd, token) in [
        ("sort --compress-program=sh f", "--compress-program=sh"),
        ("sort --compress-program sh f", "--compress-program"),
        ("sort --compress=sh f", "--compress=sh"),
        ("sort --co=sh f", "--co=sh"),
        ("sort -rno out f", "-o"),
        ("sort -T /tmp f", "-T"),
        ("sort --temporary-directory=. f", "--temporary-directory=."),
        ("tree -o out", "-o"),
        ("tree -aRL 2 -H .", "-R"),
        ("rg --pre=sh TODO", "--pre=sh"),
        ("rg --pre sh TODO", "--pre"),
        ("rg --hostname-bin=./x TODO", "--hostname-bin=./x"),
        ("rg -z TODO", "-z"),
        ("rg -nz TODO", "-z"),
        ("sed -i 's/a/b/' f", "-i"),
        ("sed -ni.bak p f", "-i"),
        ("sed --in-place=.bak p f", "--in-place=.bak"),
        ("file -C -m magic", "-C"),
        ("file --no-sandbox f", "--no-sandbox"),
        ("awk -f prog.awk f", "-f"),
        (
            "awk --dump-variables=out '{print}' f",
            "--dump-variables=out",
        ),
        ("awk -o '{print}' f", "-o"),
        ("gawk --prof '{print}' f", "--prof"),
        ("awk -W exec prog.awk f", "exec"),
        ("awk -We prog.awk f", "-We"),
        ("find . -delete", "-delete"),
        ("find . -name x -fprintf out %p", "-fprintf"),
        ("find . -execdir id \\;", "-execdir"),
        ("less -o log f", "-o"),
        ("less --log-file=log f", "--log-file=log"),
        ("less --lesskey-src=k f", "--lesskey-src=k"),
        ("less +!id f", "+!id"),
        ("man -C evil.conf ls", "-C"),
        ("man --pager=sh ls", "--pager=sh"),
        ("git -c core.pager=sh log", "-c"),
        ("git --exec-path=. log", "--exec-path=."),
        ("git log --output=out", "--output=out"),
        ("git diff --ext-diff", "--ext-diff"),
        ("git grep -O TODO", "-O"),
    ] {
        refused(cmd, token);
    }
}

#[test]
fn operands_a_program_writes_are_refused() {
    refused("uniq in.txt out.txt", "out.txt");
    refused("xxd f out", "out");
    refused("xxd -r hex f", "-r");
    refused("xxd -revert hex f", "-revert");
    refused("xxd --r hex f", "--r");
    refused("xxd -ps -r hex", "-r");
    // A value that is not a number is an operand: counted as one.
    refused("xxd -capitalize in out", "-capitalize in");
    not_refused("uniq -c in.txt");
    not_refused("xxd -c 8 in");
}

#[test]
fn unknown_options_are_refused_too() {
    for (cmd, token) in [
        ("sort --frobnicate f", "--frobnicate"),
        ("sort -Q f", "-Q"),
        ("rg --future-option TODO", "--future-option"),
        ("tree --fromfil", "--fromfil"),
        ("xxd -q f", "-q"),
        ("find . -newxy f", "-newxy"),
        ("awk -x '{print}' f", "-x"),
        ("sed --sand p f", "--sand"),
    ] {
        // `--sand` abbreviates `--sandbox`, which is harmless; it is
        // accepted (GNU getopt would read it so).
        if cmd.starts_with("sed") {
            not_refused(cmd);
            continue;
        }
        refused(cmd, token);
    }
}

#[test]
fn honest_read_only_options_are_allowed() {
    for cmd in [
        "sort -rn -k2,2 -t, f",
        "sort -u --key=1 --field-separator=: f",
        "sort -S 1M --parallel=2 f",
        "sort -c f",
        "uniq -c f",
        "rg -n --glob '*.rs' -t rust -e TODO -C 2 src",
        "rg --no-ignore --hidden -uu TODO",
        "rg --pre-glob '*.gz' TODO",
        "sed -n -e 1p -e 3p f",
        "sed -E 's/(a|b)/x/g' f",
        "sed --posix -s -n '$p' f",
        "awk -F: -v OFS=, '{print $1, $NF}' f",
        "awk '$3 > 100 { print $1 }' f",
        "awk 'NR > 1 && $2 >= 5 { n++ } END { print n }' f",
        "tree -L 2 -a --dirsfirst -I target",
        "find . -name '*.rs' -type f -newer f -print",
        "find src -maxdepth 2 \\( -name a -o -name b \\) -print0",
        "find . -newermt 2024-01-01 -O3",
        "git log --oneline -n 5 -- src",
        "git -C sub status --short",
        "git diff HEAD~1 -- *.rs",
        "git grep -n -c TODO",
        "xxd -c 8 -g 1 -l 64 -s 0x10 f",
        "xxd -cols 8 f",
        "xxd -ps f",
        "less -R -N f",
        "man -k printf",
        "file -b --mime-type f",
    ] {
        not_refused(cmd);
    }
    // The shipped policies' own examples and tables pass as they were;
    // a few honest commands under each, for the record.
    for name in SHIPPED {
        let p = load(name);
        for cmd in [
            "sort -rn f",
            "sed -n 1p f",
            "awk '{print $1}' f",
            "rg -n TODO src",
        ] {
            allowed_read_only(&p, cmd);
        }
    }
}

#[test]
fn words_the_shell_may_turn_into_options_are_refused_where_options_go() {
    for (cmd, token) in [
        ("rg TODO *", "*"),
        ("rg TODO ?x", "?x"),
        ("rg TODO [-a]*", "[-a]*"),
        ("rg TODO {--pre=sh,x}", "{--pre=sh,x}"),
        ("X=--pre=sh; rg TODO $X", "$X"),
        ("rg TODO \"$X\"", "\"$X\""),
        ("rg TODO src$X", "src$X"),
        ("rg TODO $(echo --pre=sh)", "$(echo --pre=sh)"),
        ("sort -k $K f", "$K"),
        ("sort *", "*"),
        ("find . -name *.rs", "*.rs"),
        ("find * -print", "*"),
        ("git log *", "*"),
        ("git show $(echo HEAD)", "$(echo HEAD)"),
        ("xxd *", "*"),
        ("awk \"$P\" f", "\"$P\""),
        ("sed -n p *", "*"),
    ] {
        refused(cmd, token);
    }
    // An option word with a brace is read as written, and unknown.
    refused("rg TODO --pr{e,x}=sh", "--pr{e,x}=sh");
    // After `--`, behind a literal start, or in one quoted word that does
    // not start with the expansion, they are file names.
    for cmd in [
        "rg TODO -- *",
        "rg TODO ./*",
        "rg TODO src/*",
        "rg TODO \"./$X\"",
        "sort -- *",
        "sort ./*.txt",
        "find ./* -name '*.rs'",
        "git log -- *",
        "sed -n p -- *",
        "grep -n TODO *",
        "cat $(grep -l TODO f)",
    ] {
        not_refused(cmd);
    }
}

#[test]
fn awk_programs_are_read_for_commands_files_and_redirections() {
    for (cmd, token) in [
        ("awk '{ print \"}\" > \"f2\" }' f", "> \"f2\" }"),
        ("awk '{ print \";\" >> \"f2\" }' f", ">> \"f2\" }"),
        ("awk '{ print $1, # }\n \"x\" > \"f2\" }' f", "> \"f2\" }"),
        ("awk -e 'BEGIN { system(\"id\") }'", "system"),
        ("awk --source='BEGIN { \"id\" | getline }'", "|"),
        ("awk 'BEGIN { @f() }'", "@"),
    ] {
        let d = decide(&load("code"), cmd);
        assert_eq!(d.verdict, Verdict::Deny, "{cmd}: {d:?}");
        if d.rule == TOOL {
            assert_eq!(d.token.as_deref(), Some(token), "{cmd}: {d:?}");
        }
    }
    // The `}` in a string hid the redirection from the policies' regex.
    let d = decide(&load("readonly"), "awk '{ print \"}\" > \"f2\" }' f");
    assert_eq!((d.verdict, d.rule.as_str()), (Verdict::Deny, TOOL));
    assert!(d.reason.contains("writes to a file"), "{}", d.reason);
}

fn flag(program: &str, at: usize) -> InjectedFlag {
    InjectedFlag {
        program: program.into(),
        flag: "--sandbox".into(),
        at,
    }
}

#[test]
fn sed_runs_in_its_sandbox_mode_wherever_it_is_in_the_request() {
    let p = load("readonly");
    for (cmd, at, runs) in [
        ("sed -n 1p f", vec![3], "sed --sandbox -n 1p f"),
        (
            "cat f | sed -n 1p | sed s/a/b/",
            vec![11, 23],
            "cat f | sed --sandbox -n 1p | sed --sandbox s/a/b/",
        ),
        (
            "timeout 5 env -i /usr/bin/sed -n 1p f",
            vec![29],
            "timeout 5 env -i /usr/bin/sed --sandbox -n 1p f",
        ),
        (
            "echo $(sed -n 1p f) `sed p f`",
            vec![10, 24],
            "echo $(sed --sandbox -n 1p f) `sed --sandbox p f`",
        ),
        (
            "bash -c 'ls && sed -n 1p f'",
            vec![18],
            "bash -c 'ls && sed --sandbox -n 1p f'",
        ),
        (
            "sh -c \"sed -n '1~2e id' f\"",
            vec![10],
            "sh -c \"sed --sandbox -n '1~2e id' f\"",
        ),
    ] {
        let spec = CommandSpec::Shell(cmd.to_string());
        let d = allowed_read_only(&p, cmd);
        let places: Vec<_> = d.injected.iter().map(|f| f.at).collect();
        assert_eq!(places, at, "{cmd}");
        assert!(d.injected.iter().all(|f| f == &flag("sed", f.at)));
        assert_eq!(
            d.command_to_run(&spec),
            Some(CommandSpec::Shell(runs.to_string())),
            "{cmd}"
        );
    }
    // An argv: after the program word, wrappers peeled.
    let argv = |v: &[&str]| CommandSpec::Argv(v.iter().map(|s| s.to_string()).collect());
    let spec = argv(&["nice", "sed", "-n", "1p", "f"]);
    let d = decide_in(&p, Path::new(agent_exec_policy::EXAMPLE_ROOT), &spec);
    assert_eq!(d.injected, [flag("sed", 1)]);
    assert_eq!(
        d.command_to_run(&spec),
        Some(argv(&["nice", "sed", "--sandbox", "-n", "1p", "f"]))
    );
    // Nothing is added to programs without a safe mode, nor to sed run
    // as a writer (code.toml's sed -i), whose rule is not read-only.
    assert!(allowed_read_only(&p, "sort f | head").injected.is_empty());
    let d = decide(&load("code"), "sed -i s/a/b/ f");
    assert_eq!((d.verdict, d.read_only), (Verdict::Allow, false));
    assert!(d.injected.is_empty());
}

#[test]
fn a_safe_mode_that_cannot_be_placed_refuses_the_command() {
    // The nested script is not the request's text byte for byte.
    for cmd in ["bash -c $'sed -n 1p f'", "bash -c 'sed -n '\\''1p'\\'' f'"] {
        let d = decide(&load("readonly"), cmd);
        assert_eq!((d.verdict, d.rule.as_str()), (Verdict::Deny, TOOL), "{cmd}");
        assert!(d.reason.contains("sed --sandbox"), "{}", d.reason);
    }
}

#[test]
fn a_decision_runs_only_the_command_it_was_made_for() {
    let p = load("readonly");
    let d = allowed_read_only(&p, "sed -n 1p f");
    assert_eq!(d.command_to_run(&CommandSpec::Shell("ab".into())), None);
    assert_eq!(d.command_to_run(&CommandSpec::Argv(vec![])), None);
    assert_eq!(
        d.command_to_run(&CommandSpec::Shell("é".into())),
        None,
        "not a character boundary"
    );
    let plain = allowed_read_only(&p, "cat f");
    let spec = CommandSpec::Shell("cat f".into());
    assert_eq!(plain.command_to_run(&spec), Some(spec));
}

/// A root whose PATH holds `awk` linked to a `gawk`, so the engine sees
/// GNU awk behind the name, and one where it is another awk.
fn awk_world(target: &str) -> (tempfile::TempDir, Policy) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let bin = base.join("tools/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(base.join("root")).unwrap();
    std::fs::write(bin.join(target), "").unwrap();
    std::fs::set_permissions(
        bin.join(target),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink(target, bin.join("awk")).unwrap();
    let text = format!(
        r#"
name = "awk-world"
default = "deny"
[env]
path = "{bin}"
[sandbox]
read = ["{tools}"]
[[rule]]
id = "filters"
programs = ["awk", "gawk", "mawk"]
action = "allow"
risk = "low"
read_only = true
pattern_operand = true
reason = "Filters text."
"#,
        bin = bin.display(),
        tools = base.join("tools").display()
    );
    (dir, Policy::parse(&text, "awk-world.toml").unwrap())
}

#[test]
fn gawk_runs_in_its_sandbox_mode_and_other_awks_are_only_read() {
    let run = |policy: &Policy, root: &PathBuf, cmd: &str| {
        decide_in(policy, root, &CommandSpec::Shell(cmd.to_string()))
    };
    let (dir, policy) = awk_world("gawk");
    let root = dir.path().canonicalize().unwrap().join("root");
    let d = run(&policy, &root, "awk '{print $1}' f");
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
    assert_eq!(d.injected, [flag("awk", 3)]);
    let d = run(&policy, &root, "gawk '{print $1}' f");
    assert_eq!(d.injected, [flag("gawk", 4)]);

    let (dir, policy) = awk_world("mawk");
    let root = dir.path().canonicalize().unwrap().join("root");
    let d = run(&policy, &root, "awk '{print $1}' f");
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
    assert!(d.injected.is_empty(), "{d:?}");
    // Its program is read instead.
    let d = run(&policy, &root, "mawk '{ print \"}\" > \"x\" }' f");
    assert_eq!((d.verdict, d.rule.as_str()), (Verdict::Deny, TOOL));
}

#[test]
fn variables_that_reconfigure_read_only_tools_may_not_be_set() {
    for cmd in [
        "RIPGREP_CONFIG_PATH=cfg rg TODO",
        "LESS=-olog less f",
        "LESSKEYIN=k less f",
        "MANOPT=-Psh man ls",
        "AWKPATH=. awk '{print}' f",
        "env AWKLIBPATH=. gawk '{print}' f",
    ] {
        let d = decide(&load("code"), cmd);
        assert_eq!(
            (d.verdict, d.rule.as_str()),
            (Verdict::Deny, "builtin:assignment"),
            "{cmd}"
        );
    }
}

#[test]
fn a_read_only_sandbox_with_write_paths_does_not_load() {
    let err = Policy::parse(
        "name = \"x\"\ndefault = \"deny\"\n[sandbox]\nread_only = true\nwrite = [\"/tmp/cache\"]\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("sandbox.write"), "{err}");
    let p = Policy::parse(
        "name = \"x\"\ndefault = \"deny\"\n[sandbox]\nread_only = true\n",
        "x.toml",
    )
    .unwrap();
    assert!(p.sandbox.read_only);
    assert!(load("readonly").sandbox.read_only);
    assert!(!load("code").sandbox.read_only && !load("ci").sandbox.read_only);
}

fn argument() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("-".to_string()),
        Just("--".to_string()),
        Just("-o".to_string()),
        Just("-r".to_string()),
        Just("--pre=".to_string()),
        Just("-W".to_string()),
        Just("-e".to_string()),
        Just("*".to_string()),
        Just("$X".to_string()),
        Just("{a,-b}".to_string()),
        Just("'{print > \"x\"}'".to_string()),
        Just("\"/\"".to_string()),
        "-[a-zA-Z#~?.0-9]{1,3}",
        "--[a-z-]{1,8}(=[a-z]{0,3})?",
        "\\PC{0,4}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Any arguments to any profiled program get a decision (no panic),
    /// and the evaluation agrees with it.
    #[test]
    fn profiled_programs_never_panic(
        program in prop::sample::select(vec![
            "sed", "sort", "tree", "rg", "uniq", "file", "less", "man", "awk", "gawk",
            "xxd", "find", "git",
        ]),
        args in prop::collection::vec(argument(), 0..6),
    ) {
        let text = format!("{program} {}", args.join(" "));
        let root = Path::new("/nonexistent-prop-root");
        let ctx = Context { root, cwd: root };
        let code = CODE.with(|p| p.clone());
        let spec = CommandSpec::Shell(text);
        if let Ok(d) = code.decide(&spec, &ctx) {
            let e = code.evaluate(&spec, &ctx).unwrap();
            prop_assert_eq!(e.decision(), d.clone());
            prop_assert!(d.command_to_run(&spec).is_some());
        }
        let argv = CommandSpec::Argv(
            std::iter::once(program.to_string()).chain(args).collect(),
        );
        let d = code.decide(&argv, &ctx).unwrap();
        prop_assert!(d.command_to_run(&argv).is_some());
    }
}

thread_local! {
    static CODE: Policy = load("code");
}
