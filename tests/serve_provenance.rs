//! Argument provenance over the daemon's socket: scripted sessions that
//! list, then write; guess, and are held back; and keep their ledger
//! across a daemon restart.

mod serve_common;

use serde_json::{Value, json};
use serve_common::*;

const RULES: &str = r#"
[[rule]]
id = "ls"
action = "allow"
risk = "low"
reason = "lists directories"
program = "ls"
read_only = true

[[rule]]
id = "grep"
action = "allow"
risk = "low"
reason = "searches"
program = "grep"
read_only = true
pattern_operand = true
"#;

fn fixture(mode: &str) -> Fixture {
    let fx = Fixture::new(&policy(&format!(
        "[provenance]\nmode = \"{mode}\"\n{RULES}"
    )));
    for d in ["src", "lib", "empty"] {
        std::fs::create_dir(fx.root.join(d)).unwrap();
    }
    for f in ["src/a.py", "src/b.py", "lib/c.py"] {
        std::fs::write(fx.root.join(f), "x = 1\n").unwrap();
    }
    if nix::unistd::geteuid().is_root() {
        for p in ["src", "lib", "empty", "src/a.py", "src/b.py", "lib/c.py"] {
            std::os::unix::fs::chown(fx.root.join(p), Some(65_534), Some(65_534)).unwrap();
        }
    }
    fx
}

fn write(c: &mut Client, id: &str, command: &str) -> Value {
    c.call(
        &json!({"id": id, "tool": "run_shell", "idempotency_key": format!("key-{id}-{}", unique()),
                   "args": {"command": command}}),
    )
}

/// The provenance entry for `arg`.
fn entry<'a>(r: &'a Value, arg: &str) -> &'a Value {
    r["provenance"]
        .as_array()
        .unwrap_or_else(|| panic!("no provenance in {r}"))
        .iter()
        .find(|e| e["arg"] == arg)
        .unwrap_or_else(|| panic!("no provenance entry for {arg} in {r}"))
}

#[test]
fn listed_files_are_observed_guesses_are_held_back_and_the_ledger_survives_a_restart() {
    let fx = fixture("enforce");
    let abs = fx.root.canonicalize().unwrap().join("src/a.py");
    let abs = abs.to_str().unwrap();
    let listing_id;
    {
        let mut d = fx.start(&[]);
        let mut c = fx.connect();
        let described = c.call(&json!({"id": "d", "tool": "describe"}));
        let described: Value = serde_json::from_str(described["stdout"].as_str().unwrap()).unwrap();
        assert_eq!(
            described["provenance"],
            json!({"mode": "enforce", "assumed_budget": 0})
        );

        // A write on a path nothing showed: held back, nothing runs.
        let guess = write(&mut c, "1", "echo x >> src/a.py");
        assert_eq!(error_type(&guess), "ASSUMED_ARGUMENT", "{guess}");
        assert_eq!(guess["exit_code"], Value::Null, "{guess}");
        assert_eq!(entry(&guess, "src/a.py")["tag"], "assumed");
        assert!(
            guess["message"].as_str().unwrap().contains("src/a.py"),
            "{guess}"
        );
        let suggestion = guess["suggestion"].as_str().unwrap();
        assert!(suggestion.contains("`ls src`"), "{suggestion}");
        assert!(
            suggestion.contains("git ls-files | grep a.py"),
            "{suggestion}"
        );
        assert_eq!(
            std::fs::read_to_string(fx.root.join("src/a.py")).unwrap(),
            "x = 1\n"
        );

        // Look, then write: observed, and the listing call is named.
        let listing = c.run("2", "ls src");
        assert_eq!(listing["ok"], true, "{listing}");
        listing_id = listing["call_id"].as_str().unwrap().to_string();
        for (i, form) in ["src/a.py", "./src/a.py", "src/../src/a.py", abs]
            .iter()
            .enumerate()
        {
            let edit = write(&mut c, &format!("3{i}"), &format!("echo x >> {form}"));
            assert_eq!(edit["ok"], true, "{form}: {edit}");
            let e = entry(&edit, form);
            assert_eq!(e["tag"], "observed", "{form}: {edit}");
            assert_eq!(e["path"], "src/a.py", "{form}: {edit}");
            assert_eq!(e["source"], listing_id.as_str(), "{form}: {edit}");
            assert_eq!(e["write"], true);
        }
        // From inside the directory, the bare name is the same path.
        let inside = c.call(
            &json!({"id": "4", "tool": "run_shell", "idempotency_key": format!("k4-{}", unique()),
                                    "args": {"command": "echo y >> a.py", "cwd": "src"}}),
        );
        assert_eq!(entry(&inside, "a.py")["tag"], "observed", "{inside}");

        // A new name in a listed directory: invented, and it runs.
        let new = write(&mut c, "5", "touch src/new.py");
        assert_eq!(new["ok"], true, "{new}");
        assert_eq!(entry(&new, "src/new.py")["tag"], "invented", "{new}");
        assert_eq!(entry(&new, "src/new.py")["source"], listing_id.as_str());
        assert!(fx.root.join("src/new.py").exists());

        // A path seen only in the agent's own arguments stays assumed.
        let own = c.run("6", "ls lib/c.py");
        assert_eq!(own["ok"], true, "{own}");
        assert!(own["stdout"].as_str().unwrap().contains("lib/c.py"));
        let again = write(&mut c, "7", "touch lib/c.py");
        assert_eq!(error_type(&again), "ASSUMED_ARGUMENT", "{again}");
        assert_eq!(entry(&again, "lib/c.py")["tag"], "assumed");

        // An empty result adds nothing: listing an empty directory does not
        // make a new name inside it invented.
        let nothing = c.run("8", "ls empty");
        assert_eq!(
            (nothing["ok"].clone(), nothing["stdout"].clone()),
            (json!(true), json!(""))
        );
        let in_empty = write(&mut c, "9", "touch empty/n.txt");
        assert_eq!(error_type(&in_empty), "ASSUMED_ARGUMENT", "{in_empty}");
        assert!(!fx.root.join("empty/n.txt").exists());

        // Reading is never held back, and is tagged too.
        let read = c.run("10", "ls lib");
        assert_eq!(read["ok"], true, "{read}");
        assert_eq!(entry(&read, "lib")["tag"], "assumed", "{read}");

        d.signal(nix::sys::signal::Signal::SIGTERM);
        assert!(d.wait().success());
    }
    // The restarted daemon still has the session's ledger.
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    let after = write(&mut c, "11", "echo z >> src/b.py");
    assert_eq!(after["ok"], true, "{after}");
    let e = entry(&after, "src/b.py");
    assert_eq!(e["tag"], "observed", "{after}");
    assert_eq!(e["source"], listing_id.as_str(), "{after}");
    // `ls lib` before the restart listed lib, so its file is observed now.
    let listed = write(&mut c, "12", "touch lib/c.py");
    assert_eq!(entry(&listed, "lib/c.py")["tag"], "observed", "{listed}");
    // Another session label has a ledger of its own.
    let other = c.call(
        &json!({"id": "13", "tool": "run_shell", "idempotency_key": format!("k13-{}", unique()),
                               "session": "other", "args": {"command": "touch src/b.py"}}),
    );
    assert_eq!(error_type(&other), "ASSUMED_ARGUMENT", "{other}");
}

#[test]
fn under_tag_a_guess_runs_is_tagged_audited_and_replays_with_the_same_tags() {
    let fx = fixture("tag");
    let calls = [
        ("1", "touch notes.txt", true),
        ("2", "ls", false),
        ("3", "touch notes.txt", true),
        ("4", "ls src", false),
        ("5", "touch src/a.py src/z.py ghost.txt", true),
    ];
    let send = |c: &mut Client, (id, cmd, writes): (&str, &str, bool)| -> Value {
        let mut req = json!({"id": id, "tool": "run_shell", "args": {"command": cmd}});
        if writes {
            req["idempotency_key"] = json!(format!("replay-key-{id}"));
        }
        c.call(&req)
    };
    let recorded: Vec<Value> = {
        let mut d = fx.start(&["--record"]);
        let mut c = fx.connect();
        let out: Vec<Value> = calls.iter().map(|&call| send(&mut c, call)).collect();
        d.signal(nix::sys::signal::Signal::SIGTERM);
        assert!(d.wait().success());
        out
    };
    assert_eq!(recorded[0]["ok"], true, "{}", recorded[0]);
    assert_eq!(
        entry(&recorded[0], "notes.txt")["tag"],
        "assumed",
        "{}",
        recorded[0]
    );
    assert!(fx.root.join("notes.txt").exists());
    let seen = entry(&recorded[2], "notes.txt");
    assert_eq!(seen["tag"], "observed", "{}", recorded[2]);
    assert_eq!(seen["source"], recorded[1]["call_id"]);
    let tags: Vec<_> = ["src/a.py", "src/z.py", "ghost.txt"]
        .iter()
        .map(|a| entry(&recorded[4], a)["tag"].clone())
        .collect();
    // `ls` listed the root, so a new name there is invented too.
    assert_eq!(
        tags,
        [json!("observed"), json!("invented"), json!("invented")],
        "{}",
        recorded[4]
    );

    let files = walk(&fx.state.join("traces"));
    assert!(!files.is_empty(), "no trace written");
    let text: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert!(
        text.contains("\"provenance\""),
        "the trace carries the tags"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .arg("audit")
        .arg("--json")
        .args(&files)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sessions = report["provenance"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(sessions.len(), 1, "{report}");
    assert_eq!(sessions[0]["writes_ran"], 1, "{report}");
    assert_eq!(sessions[0]["assumed"][0]["arg"], "notes.txt", "{report}");

    // Replay the recording with a fresh ledger: the same tags, each
    // source the replayed call that stands for the recorded one.
    let recording = fx.dir.path().join("recording.jsonl");
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::rename(&files[0], &recording).unwrap();
    std::fs::remove_dir_all(&fx.state).unwrap();
    let _d = fx.start(&[
        "--replay",
        recording.to_str().unwrap(),
        "--replay-mode",
        "strict",
    ]);
    let mut c = fx.connect();
    let replayed: Vec<Value> = calls.iter().map(|&call| send(&mut c, call)).collect();
    let ids: std::collections::HashMap<String, String> = recorded
        .iter()
        .zip(&replayed)
        .map(|(r, p)| {
            (
                r["call_id"].as_str().unwrap().to_string(),
                p["call_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (r, p) in recorded.iter().zip(&replayed) {
        let want: Vec<(Value, Value, Option<String>)> = r["provenance"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["arg"].clone(),
                    e["tag"].clone(),
                    e["source"].as_str().map(|s| ids[s].clone()),
                )
            })
            .collect();
        let got: Vec<(Value, Value, Option<String>)> = p["provenance"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["arg"].clone(),
                    e["tag"].clone(),
                    e["source"].as_str().map(str::to_string),
                )
            })
            .collect();
        assert_eq!(got, want, "replayed {p}\nrecorded {r}");
    }
}

#[test]
fn a_search_hit_makes_its_file_observed_and_the_pattern_is_not_an_argument() {
    let fx = fixture("enforce");
    std::fs::write(fx.root.join("lib/c.py"), "x = 1\n# TODO: c\n").unwrap();
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    let hit = c.run("1", "grep -rn 'TODO: c' lib");
    assert_eq!(hit["ok"], true, "{hit}");
    let args: Vec<&str> = hit["provenance"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["arg"].as_str().unwrap())
        .collect();
    assert_eq!(args, ["lib"], "the pattern is free text: {hit}");
    let edit = write(&mut c, "2", "echo '# done' >> lib/c.py");
    assert_eq!(edit["ok"], true, "{edit}");
    let e = entry(&edit, "lib/c.py");
    assert_eq!(
        (&e["tag"], &e["source"]),
        (&json!("observed"), &hit["call_id"]),
        "{edit}"
    );
    // A hit names a file, not its directory's whole contents.
    let beside = write(&mut c, "3", "touch lib/other.py");
    assert_eq!(error_type(&beside), "ASSUMED_ARGUMENT", "{beside}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}
