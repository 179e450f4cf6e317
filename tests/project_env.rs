//! The project's own environment through the real CLI, in every
//! deployment: `{root}` PATH entries reach the run's PATH and their
//! programs run by bare name, a virtualenv is announced as `activate`
//! would, `python` works where the host has only `python3`, and a
//! policy's git identity is not mistaken for a secret.

mod contain_common;

use contain_common::*;

const PROJECT_PATH: &str =
    "path = \"{root}/.venv/bin:{root}/node_modules/.bin:/usr/local/bin:/usr/bin:/bin\"\n";

fn project(dep: Deployment, env: &str) -> Project {
    let p = Project::with_tables(dep, false, env, "");
    p.write(".venv/pyvenv.cfg", "home = /usr/bin\n");
    p.write_exec(
        ".venv/bin/project-tool",
        "#!/bin/sh\necho \"project-tool venv=$VIRTUAL_ENV\"\n",
    );
    p.write_exec(
        "node_modules/.bin/lint-tool",
        "#!/bin/sh\necho \"lint-tool $1\"\n",
    );
    p
}

#[test]
fn project_bins_are_on_the_path_and_the_venv_is_announced() {
    for dep in Deployment::all() {
        let p = project(dep, PROJECT_PATH);
        let root = p.path().canonicalize().unwrap();
        let v = p.run(&["project-tool"]);
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        assert_eq!(
            stdout(&v).trim(),
            format!("project-tool venv={}", root.join(".venv").display()),
            "{dep:?}"
        );
        // Inside a pipeline too: the shell finds it on PATH.
        let v = p.run_shell("lint-tool src | tr a-z A-Z");
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        assert_eq!(stdout(&v).trim(), "LINT-TOOL SRC", "{dep:?}");
        let v = p.run_shell("echo \"$PATH\"");
        let path = stdout(&v).trim().to_string();
        assert!(
            path.starts_with(&format!(
                "{0}/.venv/bin:{0}/node_modules/.bin:/usr/local/bin",
                root.display()
            )),
            "{dep:?}: {path}"
        );
    }
}

#[test]
fn without_root_entries_nothing_of_the_project_is_on_the_path() {
    for dep in Deployment::all() {
        let p = project(dep, "");
        let v = p.run_shell("project-tool; echo \"$PATH|$VIRTUAL_ENV\"");
        let out = stdout(&v);
        assert!(!out.contains("project-tool venv"), "{dep:?}: {out}");
        assert!(
            out.contains("/usr/local/bin:/usr/bin:/bin") && out.trim_end().ends_with('|'),
            "{dep:?}: {out}"
        );
    }
}

#[test]
fn python_runs_where_the_host_has_only_python3() {
    if which("python3").is_none() {
        missing("python3");
        return;
    }
    for dep in Deployment::all() {
        let p = project(dep, "");
        let v = p.run(&["python", "-c", "import sys; print(sys.version_info[0])"]);
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        assert_eq!(stdout(&v).trim(), "3", "{dep:?}");
        let v = p.run_shell("python -c 'print(6*7)' 2>&1 | tail -1");
        assert_eq!(stdout(&v).trim(), "42", "{dep:?}: {v:#}");
    }
}

#[test]
fn a_policy_git_identity_reaches_the_child() {
    let env = format!(
        "{PROJECT_PATH}set = {{ GIT_AUTHOR_NAME = \"Ada Tester\", GIT_AUTHOR_EMAIL = \"ada@example.org\" }}\n"
    );
    for dep in Deployment::all() {
        let p = project(dep, &env);
        let v = p.run_shell("echo \"$GIT_AUTHOR_NAME <$GIT_AUTHOR_EMAIL>\"");
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        assert_eq!(stdout(&v).trim(), "Ada Tester <ada@example.org>", "{dep:?}");
        assert!(
            v["env_scrubbed"]
                .as_array()
                .is_none_or(|a| !a.iter().any(|n| n == "GIT_AUTHOR_NAME")),
            "{dep:?}: {v:#}"
        );
    }
}
