//! The extractors on real output of the real tools (run here, in a
//! scratch project), and the ledger's matching, normalization and bound.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::policy::PathArgument;

/// A scratch project: `src/{a.py,b.py,util/c.py}`, `docs/read me.md`, a
/// symlink `link.py -> src/a.py`, an empty `empty/`.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    std::fs::create_dir_all(r.join("src/util")).unwrap();
    std::fs::create_dir_all(r.join("docs")).unwrap();
    std::fs::create_dir_all(r.join("empty")).unwrap();
    std::fs::write(r.join("src/a.py"), "import b\n# TODO: fix\n").unwrap();
    std::fs::write(r.join("src/b.py"), "x = 1\n").unwrap();
    std::fs::write(r.join("src/util/c.py"), "# TODO later\n").unwrap();
    std::fs::write(r.join("docs/read me.md"), "hi\n").unwrap();
    std::os::unix::fs::symlink("src/a.py", r.join("link.py")).unwrap();
    dir
}

/// Runs `argv` in `dir` (C locale, no colour); stdout, stderr, success.
fn run(dir: &Path, argv: &[&str]) -> (String, String, bool) {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .env("LC_ALL", "C")
        .env("NO_COLOR", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap_or_else(|e| panic!("{argv:?} must be installed to test its extractor: {e}"));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// What a run of `command` (a shell string) in `dir` showed, as the
/// service extracts it.
fn shown(dir: &Path, command: &str) -> Extracted {
    let (stdout, stderr, ok) = run(dir, &["bash", "-c", command]);
    let producer = Producer::of(&CommandSpec::Shell(command.into()));
    let is_dir = |p: &str| dir.join(p).is_dir();
    extract(producer.as_ref(), &stdout, &stderr, ok, &is_dir)
}

fn paths(e: &Extracted, root: &Path) -> Vec<String> {
    let mut v: Vec<String> = e
        .paths
        .iter()
        .map(|(d, p)| normalize(root, &root.join(d), p))
        .collect();
    v.sort();
    v.dedup();
    v
}

fn listed(e: &Extracted, root: &Path) -> Vec<String> {
    let mut v: Vec<String> = e.listed.iter().map(|d| normalize(root, root, d)).collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn ls_long_format_gives_names_without_totals_dots_or_link_targets() {
    let p = project();
    let e = shown(p.path(), "ls -la");
    assert_eq!(paths(&e, p.path()), ["docs", "empty", "link.py", "src"]);
    assert_eq!(listed(&e, p.path()), ["."]);
    let e = shown(p.path(), "ls -l docs src");
    assert_eq!(
        paths(&e, p.path()),
        ["docs/read me.md", "src/a.py", "src/b.py", "src/util"]
    );
    assert_eq!(listed(&e, p.path()), ["docs", "src"]);
}

#[test]
fn ls_short_recursive_and_file_operands() {
    let p = project();
    let e = shown(p.path(), "ls src");
    assert_eq!(paths(&e, p.path()), ["src/a.py", "src/b.py", "src/util"]);
    let e = shown(p.path(), "ls -R src");
    assert_eq!(
        paths(&e, p.path()),
        ["src/a.py", "src/b.py", "src/util", "src/util/c.py"]
    );
    assert_eq!(listed(&e, p.path()), ["src", "src/util"]);
    // A file operand is printed as given, and lists no directory.
    let e = shown(p.path(), "ls src/a.py");
    assert_eq!(paths(&e, p.path()), ["src/a.py"]);
    assert!(e.listed.is_empty(), "{e:?}");
    // After `cd`, names are relative to where the listing ran.
    let e = shown(p.path(), "cd src && ls util");
    assert_eq!(paths(&e, p.path()), ["src/util/c.py"]);
}

#[test]
fn find_fd_rg_files_and_tree_list_every_path() {
    let p = project();
    let e = shown(p.path(), "find src");
    assert_eq!(
        paths(&e, p.path()),
        ["src", "src/a.py", "src/b.py", "src/util", "src/util/c.py"]
    );
    assert_eq!(listed(&e, p.path()), [".", "src", "src/util"]);
    // A filter shows some names, but lists no directory whole.
    let e = shown(p.path(), "find . -name '*.py'");
    assert_eq!(
        paths(&e, p.path()),
        ["link.py", "src/a.py", "src/b.py", "src/util/c.py"]
    );
    assert!(e.listed.is_empty(), "{e:?}");
    let e = shown(p.path(), "rg --files src | sort");
    assert_eq!(
        paths(&e, p.path()),
        ["src/a.py", "src/b.py", "src/util/c.py"]
    );
    let e = shown(p.path(), "tree src");
    assert_eq!(
        paths(&e, p.path()),
        ["src/a.py", "src/b.py", "src/util", "src/util/c.py"]
    );
    assert_eq!(listed(&e, p.path()), ["src", "src/util"]);
}

#[test]
fn search_hits_give_the_path_before_the_line_number() {
    let p = project();
    let e = shown(p.path(), "grep -rn TODO src");
    assert_eq!(paths(&e, p.path()), ["src/a.py", "src/util/c.py"]);
    let e = shown(p.path(), "rg -n --no-heading TODO .");
    assert_eq!(paths(&e, p.path()), ["src/a.py", "src/util/c.py"]);
    let e = shown(p.path(), "grep -rl TODO .");
    assert_eq!(paths(&e, p.path()), ["src/a.py", "src/util/c.py"]);
    // Nothing found: an empty result shows nothing.
    assert_eq!(shown(p.path(), "grep -rn NOPE src"), Extracted::default());
}

#[test]
fn tracebacks_and_compiler_messages_name_their_files() {
    let p = project();
    std::fs::create_dir_all(p.path().join("tests")).unwrap();
    std::fs::write(
        p.path().join("tests/test_x.py"),
        "import helper\n\ndef test_bad():\n    helper.boom()\n",
    )
    .unwrap();
    std::fs::write(
        p.path().join("tests/helper.py"),
        "def boom():\n    raise ValueError('no')\n",
    )
    .unwrap();
    let e = shown(
        p.path(),
        "python3 -m pytest -q -p no:cacheprovider tests/test_x.py",
    );
    let got = paths(&e, p.path());
    assert!(
        got.contains(&"tests/helper.py".to_string()),
        "pytest's traceback names the helper: {got:?}"
    );
    let e = shown(
        p.path(),
        "python3 tests/helper.py; python3 -c 'import sys; sys.path.insert(0, \"tests\"); import helper; helper.boom()'",
    );
    assert!(
        paths(&e, p.path()).contains(&"tests/helper.py".to_string()),
        "{e:?}"
    );

    std::fs::write(
        p.path().join("src/lib.rs"),
        "pub fn f() -> u32 {\n    \"no\"\n}\n",
    )
    .unwrap();
    let e = shown(
        p.path(),
        "rustc --crate-type lib --edition 2021 -o /dev/null src/lib.rs",
    );
    assert_eq!(paths(&e, p.path()), ["src/lib.rs"], "{e:?}");
}

#[test]
fn git_output_gives_hashes_branches_and_files() {
    let p = project();
    let git = |args: &str| run(p.path(), &["bash", "-c", &format!("git {args}")]);
    for c in [
        "init -q -b main",
        "-c user.email=t@e -c user.name=t add src",
        "-c user.email=t@e -c user.name=t commit -q -m first",
        "branch feature/x",
        "-c user.email=t@e -c user.name=t commit -q --allow-empty -m second",
    ] {
        assert!(git(c).2, "git {c} failed");
    }
    let (head, _, _) = git("rev-parse HEAD");
    let e = shown(p.path(), "git log --oneline --decorate");
    assert_eq!(e.hashes.len(), 2, "{e:?}");
    assert!(head.starts_with(&e.hashes[0]), "{e:?} {head}");
    assert!(e.refs.contains(&"main".to_string()), "{e:?}");
    assert!(e.refs.contains(&"feature/x".to_string()), "{e:?}");
    let e = shown(p.path(), "git branch");
    assert_eq!(e.refs, ["feature/x", "main"]);
    let e = shown(p.path(), "git log -1");
    assert_eq!(e.hashes, [head.trim()]);
    let e = shown(p.path(), "git ls-files");
    assert_eq!(
        paths(&e, p.path()),
        ["src/a.py", "src/b.py", "src/util/c.py"]
    );
    std::fs::write(p.path().join("src/b.py"), "x = 2\n").unwrap();
    let e = shown(p.path(), "git status --short");
    assert!(
        paths(&e, p.path()).contains(&"src/b.py".to_string()),
        "{e:?}"
    );
    assert!(
        paths(&e, p.path()).contains(&"docs/".trim_end_matches('/').to_string()),
        "{e:?}"
    );
    let e = shown(p.path(), "git status");
    assert!(
        paths(&e, p.path()).contains(&"src/b.py".to_string()),
        "{e:?}"
    );
}

#[test]
fn a_failed_commands_usage_message_shows_nothing() {
    let p = project();
    assert_eq!(shown(p.path(), "ls --bogus-option"), Extracted::default());
    assert_eq!(shown(p.path(), "git frobnicate"), Extracted::default());
    assert_eq!(shown(p.path(), "ls no/such/dir"), Extracted::default());
}

fn arg(root: &Path, base: &str, value: &str, write: bool) -> PathArgument {
    PathArgument {
        shown: value.to_string(),
        value: value.to_string(),
        write,
        base: root.join(base),
        program: None,
    }
}

#[test]
fn every_spelling_of_a_path_is_one_entry() {
    let root = PathBuf::from("/srv/p");
    let mut l = Ledger::new(100);
    let found = Extracted {
        paths: vec![(".".into(), "src/a.py".into())],
        listed: vec!["src".into()],
        ..Default::default()
    };
    l.record(&root, &root, "c-1", &found, &[]);
    for (base, v) in [
        (".", "src/a.py"),
        (".", "./src/a.py"),
        (".", "src/../src/a.py"),
        (".", "/srv/p/src/a.py"),
        ("src", "a.py"),
        ("docs", "../src/a.py"),
    ] {
        let t = l.tag(&root, &arg(&root, base, v, true));
        assert_eq!(
            (t.tag, t.source.as_deref(), t.path.as_str()),
            (ProvenanceTag::Observed, Some("c-1"), "src/a.py"),
            "{base} {v}"
        );
    }
    // Its directory is known to exist too.
    assert_eq!(
        l.tag(&root, &arg(&root, ".", "src", false)).tag,
        ProvenanceTag::Observed
    );
    let t = l.tag(&root, &arg(&root, ".", "src/new.py", true));
    assert_eq!(
        (t.tag, t.source.as_deref()),
        (ProvenanceTag::Invented, Some("c-1"))
    );
    let t = l.tag(&root, &arg(&root, ".", "src/deeper/new.py", true));
    assert_eq!(t.tag, ProvenanceTag::Assumed);
    assert_eq!(
        l.tag(&root, &arg(&root, ".", ".", false)).tag,
        ProvenanceTag::Observed
    );
}

#[test]
fn the_requests_own_arguments_do_not_become_observed() {
    let root = PathBuf::from("/srv/p");
    let mut l = Ledger::new(100);
    let found = Extracted {
        paths: vec![(".".into(), "x.py".into()), (".".into(), "y.py".into())],
        hashes: vec!["0123456789abcdef".into()],
        ..Default::default()
    };
    l.record(
        &root,
        &root,
        "c-1",
        &found,
        // A multibyte character where a hash prefix's seventh byte would be.
        &["x.py".into(), "0123456".into(), "abcdef\u{e9}gh".into()],
    );
    assert_eq!(
        l.tag(&root, &arg(&root, ".", "x.py", true)).tag,
        ProvenanceTag::Assumed
    );
    assert_eq!(
        l.tag(&root, &arg(&root, ".", "y.py", true)).tag,
        ProvenanceTag::Observed
    );
    assert_eq!(
        l.tag(&root, &arg(&root, ".", "0123456", false)).tag,
        ProvenanceTag::Assumed
    );
}

#[test]
fn hashes_match_by_prefix_and_branches_by_name() {
    let root = PathBuf::from("/srv/p");
    let mut l = Ledger::new(100);
    let found = Extracted {
        hashes: vec!["a1b2c3d4e5f6a7b8c9d0a1b2c3d4e5f6a7b8c9d0".into()],
        refs: vec!["feature/x".into()],
        ..Default::default()
    };
    l.record(&root, &root, "c-9", &found, &[]);
    for v in ["a1b2c3d", "a1b2c3d4e5f6", "feature/x"] {
        let t = l.tag(&root, &arg(&root, ".", v, false));
        assert_eq!(
            (t.tag, t.source.as_deref()),
            (ProvenanceTag::Observed, Some("c-9")),
            "{v}"
        );
    }
    assert_eq!(
        l.tag(&root, &arg(&root, ".", "b1b2c3d", false)).tag,
        ProvenanceTag::Assumed
    );
}

#[test]
fn the_ledger_is_bounded_and_drops_the_least_recently_used() {
    let root = PathBuf::from("/srv/p");
    let mut l = Ledger::new(1_000);
    let batch = |from: usize| Extracted {
        paths: (from..from + 500)
            .map(|i| (".".to_string(), format!("f{i}.txt")))
            .collect(),
        ..Default::default()
    };
    l.record(&root, &root, "c-1", &batch(0), &[]);
    // Used again, so it outlives the rest of its batch.
    assert_eq!(
        l.tag(&root, &arg(&root, ".", "f0.txt", true)).tag,
        ProvenanceTag::Observed
    );
    for k in 1..10 {
        l.record(&root, &root, &format!("c-{k}"), &batch(k * 500), &[]);
        assert!(l.len() <= 1_000, "{}", l.len());
    }
    assert_eq!(
        l.tag(&root, &arg(&root, ".", "f1.txt", true)).tag,
        ProvenanceTag::Assumed
    );
    assert_eq!(
        l.tag(&root, &arg(&root, ".", "f4999.txt", true)).tag,
        ProvenanceTag::Observed
    );
    // Saved changes bring the same ledger back.
    let again = Ledger::from_rows(1_000, l.rows());
    assert_eq!(again.len(), l.len());
}

#[test]
fn the_session_file_keeps_a_ledger_between_processes() {
    let dir = tempfile::tempdir().unwrap();
    let file = SessionFile::new(dir.path().join("s.json"));
    let s = SessionId::new(0, None);
    assert!(file.ledger_load(&s).unwrap().is_empty());
    let row = |k: &str, t| LedgerRow {
        key: k.into(),
        source: "c-1".into(),
        tick: t,
    };
    file.ledger_save(&s, &[row("p:a", 1), row("p:b", 2)], &[])
        .unwrap();
    file.ledger_save(&s, &[row("p:a", 3)], &["p:b".into()])
        .unwrap();
    assert_eq!(file.ledger_load(&s).unwrap(), [row("p:a", 3)]);
}

#[test]
fn the_suggested_read_lists_the_nearest_existing_directory() {
    let p = project();
    let s = suggest_read("src/util/new/x.py", p.path());
    assert!(s.contains("`ls src/util`"), "{s}");
    assert!(s.contains("git ls-files | grep x.py"), "{s}");
    assert!(suggest_read("top.txt", p.path()).contains("`ls .`"));
}

#[test]
fn the_lines_a_truncation_cut_through_are_dropped() {
    let text = "src/a.py\nsrc/b.p\n[... 123 bytes omitted ...]\ny.py\nsrc/z.py\n";
    assert_eq!(extract::whole_lines(text), "src/a.py\nsrc/z.py\n");
    assert_eq!(extract::whole_lines("a\nb\n"), "a\nb\n");
}
