//! Nothing a run kills is left as a zombie. Its own test binary, so every
//! child of this process belongs to the runs below.

mod exec_common;

use agent_exec::exec::{CancelToken, Termination, run};
use exec_common::{marker, own_children, procs_with, sh};

#[test]
fn killed_descendants_are_reaped() {
    for script in [
        // Orphans killed by the sweep.
        "(setsid sleep 300 >/dev/null 2>&1 &); (sleep 300 >/dev/null 2>&1 &); echo ok",
        // An orphan that exits by itself inside the run's session.
        "(sh -c 'exit 0' &); sleep 0.1; echo ok",
        // A timeout with a tree of background jobs.
        "sleep 300 & sleep 300 & (sleep 300 &); echo ok; sleep 300",
    ] {
        let m = marker();
        let mut spec = sh(script, &m);
        spec.timeout = std::time::Duration::from_secs(2);
        let out = run(spec, &CancelToken::new()).unwrap();
        assert_eq!(out.stdout.text, "ok\n", "{script}");
        assert!(matches!(
            out.termination,
            Termination::Exited(0) | Termination::TimedOut
        ));
        assert!(procs_with(&m).is_empty(), "{script}");
        assert_eq!(own_children(), Vec::new(), "{script}");
    }
}
