//! What runs leave behind: the daemon reaps every process a run leaves
//! with it.

mod serve_common;

use serve_common::*;

/// Runs `sh FILE` for scripts written into the root (the policy sees only
/// `sh FILE`; the script is the command's own business).
fn script_policy(extra: &str) -> String {
    policy(&format!(
        "{extra}\n\n[[rule]]\nid = \"sh-script\"\naction = \"allow\"\nrisk = \"low\"\n\
         reason = \"runs a script of the project\"\nprogram = \"sh\"\nread_only = true\n"
    ))
}

#[test]
fn setsid_double_forks_leave_no_zombie_and_later_runs_work() {
    let fx = Fixture::new(&script_policy(""));
    // 50 children that leave the run's session, lose their parent at once
    // (it exits without waiting) and exit by themselves while the run still
    // goes on: dead, re-parented to the daemon, and no longer attributable
    // to the run by session or environment.
    std::fs::write(
        fx.root.join("zombies.sh"),
        "i=0\nwhile [ $i -lt 50 ]; do\n  (setsid sh -c 'sleep 0.2' >/dev/null 2>&1 &)\n  \
         i=$((i+1))\ndone\nsleep 1\necho spawned\n",
    )
    .unwrap();
    let d = fx.start(&[]);
    let mut c = fx.connect();
    for round in 0..3 {
        let r = c.run(&format!("z{round}"), "sh zombies.sh");
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["stdout"], "spawned\n", "{r}");
        // Reaped before the result, or at the latest when they die.
        wait_until("the daemon has no zombie child", || {
            zombie_children(d.pid()).is_empty()
        });
    }
    let after = c.run("after", "echo still-works");
    assert_eq!(after["ok"], true, "{after}");
    assert_eq!(after["stdout"], "still-works\n");
    assert!(
        zombie_children(d.pid()).is_empty(),
        "{:?}",
        zombie_children(d.pid())
    );
}
