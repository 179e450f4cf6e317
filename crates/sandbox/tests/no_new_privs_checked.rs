//! The summary's `no_new_privs` is a measurement: every sandboxed child
//! reads the flag back after setting it, and a child for which it does
//! not hold never runs. Simulated with an outer seccomp filter, as a
//! container runtime's profile could do, that makes
//! `prctl(PR_SET_NO_NEW_PRIVS)` report success without doing anything.

mod common;

use std::sync::Arc;

use agent_exec_sandbox::{Enforcement, Layer, Requirement, SandboxConfig, SpawnError};
use common::*;

/// Installs, on the calling thread only, a filter under which
/// `prctl(PR_SET_NO_NEW_PRIVS, ..)` returns 0 without running. Needs
/// CAP_SYS_ADMIN (the tests run as root), since the thread must not have
/// no_new_privs set already.
fn fake_no_new_privs() {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const RET_ERRNO_0: u32 = 0x0005_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let insn = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let prog = [
        insn(LD_W_ABS, 0, 0, 0),                             // nr
        insn(JEQ_K, 0, 3, libc::SYS_prctl as u32),           // prctl?
        insn(LD_W_ABS, 0, 0, 16),                            // args[0], low half
        insn(JEQ_K, 0, 1, libc::PR_SET_NO_NEW_PRIVS as u32), // the set?
        insn(RET_K, 0, 0, RET_ERRNO_0),                      // "succeeds", does nothing
        insn(RET_K, 0, 0, RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: a valid program for the lifetime of the call; the filter
    // applies to this thread (no TSYNC) and the children it starts.
    let r = unsafe { libc::syscall(libc::SYS_seccomp, 1, 0, &fprog as *const libc::sock_fprog) };
    assert_eq!(
        r,
        0,
        "installing the test filter: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a plain prctl.
    let set = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    // SAFETY: a plain prctl.
    let get = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    assert_eq!((set, get), (0, 0), "the filter fakes the flag");
}

#[test]
fn a_child_without_no_new_privs_never_runs() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the sandbox tests run as root"
    );
    let r = root();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    assert!(
        status.contains("NoNewPrivs:\t0"),
        "the test process has it set"
    );
    // Landlock and seccomp refuse a process without the flag (the child
    // has no capability left by then): off, so that only the check stands
    // between a child without it and its program.
    let mut cfg = SandboxConfig {
        enforcement: Enforcement::Strict,
        ..config()
    };
    cfg.require.set(Layer::Landlock, Some(Requirement::Off));
    cfg.require.set(Layer::Seccomp, Some(Requirement::Off));
    // Children spawned by the run's own thread, which carries the filter
    // (a child made ahead is cloned by the sandbox's thread).
    let sb = agent_exec_sandbox::Sandbox::prepare(supervisor_spawning_each_run(), &cfg, &r.path)
        .unwrap();
    assert!(sb.summary().no_new_privs);

    // Outside the filter a run has the flag, as the summary says.
    let o = run(&sb, &r.path, &["/bin/cat", "/proc/self/status"]);
    assert!(o.stdout.contains("NoNewPrivs:\t1"), "{o:?}");

    let marker = r.path.join("ran");
    let outcome = std::thread::spawn({
        let sb = sb.clone();
        let root = r.path.clone();
        move || {
            fake_no_new_privs();
            let run = Arc::new(sb.for_run().unwrap());
            let script = "touch ran; grep NoNewPrivs /proc/self/status";
            try_exec(spec(&run, &root, &["/bin/sh", "-c", script]))
        }
    })
    .join()
    .unwrap();
    match outcome {
        Err(SpawnError::Setup { step, source }) => {
            assert_eq!(step, "no_new_privs");
            assert_eq!(source.raw_os_error(), Some(libc::EPERM));
        }
        Ok(o) => panic!(
            "the child ran though no_new_privs did not hold (the summary says it does): {:?}",
            o.stdout.text
        ),
        Err(e) => panic!("expected a failed no_new_privs step, got {e}"),
    }
    assert!(!marker.exists(), "the program ran");
}
