//! Runs inside a real sandbox with a run cgroup: the cgroup kills what
//! escaped the session and dropped the run's environment marker (so the
//! marker sweep cannot see it), and the supervisor reaps what it killed.

mod exec_common;
mod sandbox_common;

use std::ffi::CString;
use std::sync::Arc;
use std::time::Duration;

use agent_exec::exec::{CancelToken, ExecSpec, Termination, run};
use exec_common::{MARK_ENV, marker, procs_with};

#[test]
fn escaped_grandchildren_die_with_the_cgroup() {
    let root = sandbox_common::root();
    let sb = sandbox_common::sandbox(&root.path);
    let rs = Arc::new(sb.for_run().unwrap());
    if rs.is_empty().is_none() {
        eprintln!("no run cgroup on this host: nothing to test here");
        return;
    }
    let m = marker();
    let p = root.path.join("pid");
    let p = p.display();
    let script = format!(
        "(setsid sh -c 'echo $$ > {p}.tmp; mv {p}.tmp {p}; exec env -i /bin/sleep 300' >/dev/null 2>&1 </dev/null &); \
         while [ ! -e {p} ]; do sleep 0.01; done; echo started"
    );
    let mut child = sandbox_common::spec(&rs, &root.path, &["/bin/sh", "-c", &script]);
    child
        .env
        .push(CString::new(format!("{MARK_ENV}={m}")).unwrap());
    let spec = ExecSpec {
        child,
        stdin: None,
        timeout: Duration::from_secs(60),
        kill_grace: Duration::from_millis(500),
        drain: Duration::from_millis(500),
        output_chars: 1000,
        hard_limit_bytes: 0,
    };
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.stdout.text, "started\n", "{:?}", out.stderr);
    assert_eq!(out.termination, Termination::Exited(0));
    let pid: i32 = std::fs::read_to_string(root.path.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pid > 0);
    assert_eq!(procs_with(&m), Vec::<i32>::new());
    assert_eq!(rs.is_empty(), Some(true));
    // Not even a zombie is left behind: the supervisor reaped it.
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the escaped grandchild {pid} still exists (alive or an unreaped zombie)"
    );
}
