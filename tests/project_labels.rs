//! Results that say what happened: a failure the sandbox caused is
//! labelled as the sandbox's (a path, the network, a root the run's user
//! cannot write), also inside a pipeline that exits 0; exit status 1 of
//! `grep`, `diff`, `cmp` and `test` is an answer (`NO_MATCH`).

mod contain_common;

use contain_common::*;

#[test]
fn exit_1_of_answering_programs_is_no_match() {
    for dep in Deployment::all() {
        let p = Project::new(dep, false);
        p.write("a.txt", "one\n");
        p.write("b.txt", "two\n");
        for cmd in [
            "grep absent a.txt",
            "diff a.txt b.txt",
            "cmp -s a.txt b.txt",
            "[ -f missing ]",
            "cat a.txt | grep -c absent",
        ] {
            let v = p.run_shell(cmd);
            assert_eq!(v["error_type"], "NO_MATCH", "{dep:?} {cmd}: {v:#}");
            assert_eq!(v["ok"], false, "{dep:?} {cmd}");
            assert_eq!(v["exit_code"], 1, "{dep:?} {cmd}");
            assert_eq!(v["recoverable"], true, "{dep:?} {cmd}");
        }
        // An error stays one: grep's own failure is status 2, on stderr.
        let v = p.run_shell("grep x missing.txt");
        assert_eq!(v["error_type"], "NONZERO_EXIT", "{dep:?}: {v:#}");
        // And another program's status 1 is a failure.
        let v = p.run_shell("false");
        assert_eq!(v["error_type"], "NONZERO_EXIT", "{dep:?}: {v:#}");
    }
}

#[test]
fn a_name_lookup_without_network_is_network_disabled() {
    let lookup = "import socket; socket.getaddrinfo('pypi.org', 443)";
    for dep in Deployment::all() {
        let p = Project::new(dep, false);
        let v = p.run(&[PYTHON, "-c", lookup]);
        assert_eq!(v["error_type"], "NETWORK_DISABLED", "{dep:?}: {v:#}");
        assert!(
            v["suggestion"].as_str().unwrap().contains("offline"),
            "{dep:?}: {v:#}"
        );
        // In a pipeline whose status is its last command's: still said.
        let v = p.run_shell(&format!("{PYTHON} -c \"{lookup}\" | cat"));
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("the sandbox refused part"),
            "{dep:?}: {v:#}"
        );
    }
}

#[test]
fn a_refused_path_inside_a_pipeline_is_said() {
    for dep in Deployment::all() {
        let p = Project::new(dep, false);
        let v = p.run_shell(&format!(
            "{PYTHON} -c \"open('/etc/shadow')\" | cat; echo after"
        ));
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains("/etc/shadow"), "{dep:?}: {v:#}");
    }
}

#[test]
fn writes_a_nobody_child_cannot_make_are_the_setups() {
    if !is_root() {
        missing("root, to supervise a root-owned project");
        return;
    }
    let p = Project::with_sandbox(
        Deployment::RootOnRootProject,
        false,
        "root_owned_child = \"nobody\"\n",
    );
    let v = p.run_shell("touch made-here");
    assert_eq!(v["error_type"], "SANDBOX_VIOLATION", "{v:#}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("cannot write the project root"),
        "{v:#}"
    );
}
