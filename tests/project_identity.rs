//! Where a run has its own mount namespace, `/etc/passwd` and `/etc/group`
//! are a synthesized minimal pair (root, nobody, the run's user): owners
//! print as names, the host's accounts stay out of view, and the file is
//! read-only to the run.

mod contain_common;

use contain_common::*;

#[test]
fn owners_print_as_names_and_the_hosts_accounts_stay_hidden() {
    for dep in Deployment::all() {
        let p = Project::new(dep, false);
        p.write("notes.txt", "x\n");
        let probe = "import os, pwd, grp\n\
                     st = os.stat('notes.txt')\n\
                     print(pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name)\n\
                     print(len(open('/etc/passwd').read().splitlines()))\n";
        let v = p.run(&[PYTHON, "-c", probe]);
        let namespaced = v["sandbox"]["limits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "mount_namespace");
        if !namespaced {
            // No private view: the host's file is Landlock's to refuse.
            assert_ne!(v["ok"], true, "{dep:?}: {v:#}");
            continue;
        }
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        let out = stdout(&v);
        let mut lines = out.lines();
        let owner = lines.next().unwrap();
        assert!(
            !owner.chars().next().unwrap().is_ascii_digit(),
            "{dep:?}: numeric owner: {out}"
        );
        if dep == Deployment::RootOnRootProject {
            assert_eq!(owner, "root root", "{dep:?}");
        }
        let entries: usize = lines.next().unwrap().parse().unwrap();
        assert!(entries <= 3, "{dep:?}: the host's passwd shows: {out}");
        // The file is read-only for the run, whoever it is.
        let v = p.run(&[
            PYTHON,
            "-c",
            "open('/etc/passwd', 'a').write('x:x:0:0::/:/bin/sh\\n')",
        ]);
        assert_ne!(v["ok"], true, "{dep:?}: {v:#}");
    }
}

// The policy's explained refusal of `cat /etc/passwd` is
// `cli.rs::reading_etc_passwd_is_refused_and_the_reason_names_the_argument`.
