//! A child the kernel kills at birth in its cgroup is started again the
//! other way. A test binary of its own: the spawn then stops using
//! `CLONE_INTO_CGROUP` for the whole process, which would hide the clone3
//! path from the tests in `exec_cgroup.rs`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent_exec_sandbox::{CancelToken, Termination, run};
use common::require_kernel_feature;

#[test]
fn a_child_killed_at_birth_by_the_kernel_is_started_again_the_other_way() {
    // A cgroup that saw `cgroup.kill` (here: its run killed it while it
    // was still empty) makes the kernel SIGKILL a child cloned into it
    // before that child runs anything. The spawn notices (the child never
    // started), reaps it, and starts it with plain clone plus a write to
    // `cgroup.procs`; the command runs once.
    let root = common::root();
    // The run's own thread spawns its child (a child made ahead would be in
    // the cgroup already, and die in its kill).
    let sb = agent_exec_sandbox::Sandbox::prepare(
        common::supervisor_spawning_each_run(),
        &common::config(),
        &root.path,
    )
    .unwrap();
    let rs = Arc::new(sb.for_run().unwrap());
    if !require_kernel_feature("a run cgroup", rs.is_empty().is_some()) {
        return;
    }
    assert!(rs.kill_all().unwrap());
    let count = root.path.join("count");
    let script = format!("echo x >> {}; echo ok", count.display());
    let mut spec = common::spec(&rs, &root.path, &["/bin/sh", "-c", &script]);
    spec.timeout = Duration::from_secs(60);
    spec.kill_grace = Duration::from_millis(500);
    spec.drain = Duration::from_millis(200);
    spec.output_chars = 1000;
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Exited(0), "{:?}", out.stderr);
    assert_eq!(out.stdout.text, "ok\n");
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "x\n");
}
