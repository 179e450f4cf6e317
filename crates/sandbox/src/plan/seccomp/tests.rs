//! Verdicts of the generated filter, checked by interpreting it: against
//! seccompiler's output for the same list, and for the calls each check
//! exists for.

use super::*;
use std::collections::BTreeMap;

/// Minimal interpreter for the instructions either generator emits.
pub(crate) fn run(prog: &[libc::sock_filter], data: &[u8; 64]) -> u32 {
    run_counted(prog, data).0
}

fn run_counted(prog: &[libc::sock_filter], data: &[u8; 64]) -> (u32, usize) {
    let mut a: u32 = 0;
    let mut pc = 0usize;
    let mut steps = 0;
    loop {
        let ins = prog[pc];
        pc += 1;
        steps += 1;
        let class = ins.code & 0x07;
        match class {
            0x00 => {
                assert_eq!(ins.code, BPF_LD_W_ABS, "unsupported load {:#x}", ins.code);
                let k = ins.k as usize;
                a = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
            }
            0x04 => {
                assert_eq!(ins.code, BPF_ALU_AND_K);
                a &= ins.k;
            }
            0x05 => {
                let op = ins.code & 0xf0;
                if op == 0x00 {
                    pc += ins.k as usize;
                    continue;
                }
                assert_eq!(ins.code & 0x08, 0, "only K jumps");
                let taken = match op {
                    0x10 => a == ins.k,
                    0x20 => a > ins.k,
                    0x30 => a >= ins.k,
                    0x40 => a & ins.k != 0,
                    _ => panic!("unsupported jump {:#x}", ins.code),
                };
                pc += if taken { ins.jt } else { ins.jf } as usize;
            }
            0x06 => return (ins.k, steps),
            _ => panic!("unsupported class {:#x}", ins.code),
        }
    }
}

fn data(nr: u32, arch: u32, args: [u64; 6]) -> [u8; 64] {
    let mut d = [0u8; 64];
    d[0..4].copy_from_slice(&nr.to_le_bytes());
    d[4..8].copy_from_slice(&arch.to_le_bytes());
    for (i, v) in args.iter().enumerate() {
        d[16 + 8 * i..24 + 8 * i].copy_from_slice(&v.to_le_bytes());
    }
    d
}

/// The same policy expressed with seccompiler (EPERM part, plus a
/// separate ENOSYS filter for the entries that need it).
fn seccompiler_reference(opts: Options) -> (Vec<libc::sock_filter>, Vec<libc::sock_filter>) {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond,
        SeccompFilter, SeccompRule, TargetArch,
    };
    let arch: TargetArch = std::env::consts::ARCH.try_into().unwrap();
    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut enosys: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let c = |i, op, v| Cond::new(i, Len::Dword, op, v).unwrap();
    let rule = |conds| SeccompRule::new(conds).unwrap();
    for (nr, check) in deny_list(opts) {
        let nr = i64::from(nr);
        let rules = match check {
            Check::Errno(e) if e == libc::ENOSYS as u32 => {
                enosys.insert(nr, vec![]);
                continue;
            }
            Check::Errno(_) => vec![],
            Check::CloneFlags => (0..32)
                .map(|bit| 1u64 << bit)
                .filter(|f| u64::from(CLONE_NS_FLAGS) & f != 0)
                .map(|f| rule(vec![c(0, Op::MaskedEq(f), f)]))
                .collect(),
            Check::SocketDomain { inet, unix } => {
                let unix_dom = libc::AF_UNIX as u64;
                let mut rules = Vec::new();
                if !unix {
                    rules.push(rule(vec![c(0, Op::Eq, unix_dom)]));
                }
                let mut others = vec![c(0, Op::Ne, unix_dom)];
                if inet {
                    others.push(c(0, Op::Ne, libc::AF_INET as u64));
                    others.push(c(0, Op::Ne, libc::AF_INET6 as u64));
                    for dom in [libc::AF_INET, libc::AF_INET6] {
                        rules.push(rule(vec![
                            c(0, Op::Eq, dom as u64),
                            c(1, Op::MaskedEq(0xf), libc::SOCK_RAW as u64),
                        ]));
                    }
                }
                rules.push(rule(others));
                rules
            }
            Check::SocketPair { dgram } => {
                let mut rules = vec![rule(vec![c(0, Op::Ne, libc::AF_UNIX as u64)])];
                if !dgram {
                    let connected = [libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64];
                    for t in (0..16).filter(|t| !connected.contains(t)) {
                        rules.push(rule(vec![
                            c(0, Op::Eq, libc::AF_UNIX as u64),
                            c(1, Op::MaskedEq(0xf), t),
                        ]));
                    }
                }
                rules
            }
            Check::Personality => {
                vec![rule(vec![c(0, Op::Ne, 0), c(0, Op::Ne, 0xffff_ffff)])]
            }
            Check::IoctlCmd => vec![
                rule(vec![c(1, Op::Eq, libc::TIOCSTI as u64)]),
                rule(vec![c(1, Op::Eq, libc::TIOCLINUX as u64)]),
            ],
            Check::SelfPid => vec![rule(vec![c(0, Op::Ne, 0)])],
            Check::SelfWhich(which) => vec![
                rule(vec![c(0, Op::Ne, u64::from(which))]),
                rule(vec![c(1, Op::Ne, 0)]),
            ],
        };
        eperm.insert(nr, rules);
    }
    let mk = |rules, e: i32| -> Vec<libc::sock_filter> {
        let f = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(e as u32),
            arch,
        )
        .unwrap();
        let p: seccompiler::BpfProgram = f.try_into().unwrap();
        p.iter()
            .map(|i| libc::sock_filter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect()
    };
    (mk(eperm, libc::EPERM), mk(enosys, libc::ENOSYS))
}

fn all_options() -> [Options; 4] {
    [(false, false), (true, false), (false, true), (true, true)]
        .map(|(inet, unix_sockets)| Options { inet, unix_sockets })
}

#[test]
fn matches_seccompiler_reference() {
    for opts in all_options() {
        let ours = build(opts).unwrap();
        let (ref_eperm, ref_enosys) = seccompiler_reference(opts);
        let arg_values: [u64; 14] = [
            0,
            1,
            2,
            3,
            10,
            16,
            40,
            4242,
            0xffff_ffff,
            1 << 32,
            libc::SIGCHLD as u64,
            libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64,
            (libc::CLONE_VM | libc::CLONE_VFORK) as u64,
            libc::TIOCSTI as u64,
        ];
        let mut compared = 0;
        for nr in 0..480u32 {
            for a0 in arg_values {
                for a1 in [
                    0u64,
                    4242,
                    libc::SOCK_RAW as u64,
                    libc::SOCK_STREAM as u64,
                    libc::SOCK_SEQPACKET as u64 | libc::SOCK_NONBLOCK as u64,
                    libc::TIOCLINUX as u64,
                    libc::TIOCSTI as u64,
                    libc::SOCK_DGRAM as u64 | libc::SOCK_CLOEXEC as u64,
                ] {
                    let d = data(nr, AUDIT_ARCH, [a0, a1, 0, 0, 0, 0]);
                    let r1 = run(&ref_eperm, &d);
                    let expected = if r1 != RET_ALLOW {
                        r1
                    } else {
                        run(&ref_enosys, &d)
                    };
                    assert_eq!(
                        run(&ours, &d),
                        expected,
                        "nr={nr} a0={a0:#x} a1={a1:#x} {opts:?}"
                    );
                    compared += 1;
                }
            }
        }
        assert!(compared > 50_000);
    }
}

/// Verdict for `nr` with these first two arguments.
fn verdict(prog: &[libc::sock_filter], nr: libc::c_long, a0: u64, a1: u64) -> u32 {
    run(prog, &data(nr as u32, AUDIT_ARCH, [a0, a1, 0, 0, 0, 0]))
}

#[test]
fn calls_on_other_processes_only_reach_the_caller() {
    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    let p = build(Options::default()).unwrap();
    for nr in [
        libc::SYS_prlimit64,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
        libc::SYS_sched_getattr,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
        libc::SYS_get_robust_list,
    ] {
        assert_eq!(verdict(&p, nr, 0, 7), RET_ALLOW, "nr {nr} on the caller");
        assert_eq!(verdict(&p, nr, 4242, 7), EPERM, "nr {nr} on pid 4242");
    }
    let (prio, ioprio) = (libc::SYS_setpriority, libc::SYS_ioprio_set);
    assert_eq!(verdict(&p, prio, libc::PRIO_PROCESS as u64, 0), RET_ALLOW);
    assert_eq!(verdict(&p, prio, libc::PRIO_PROCESS as u64, 4242), EPERM);
    assert_eq!(verdict(&p, prio, libc::PRIO_PGRP as u64, 0), EPERM);
    assert_eq!(verdict(&p, prio, libc::PRIO_USER as u64, 0), EPERM);
    assert_eq!(verdict(&p, ioprio, IOPRIO_WHO_PROCESS as u64, 0), RET_ALLOW);
    assert_eq!(verdict(&p, ioprio, IOPRIO_WHO_PROCESS as u64, 9), EPERM);
    assert_eq!(verdict(&p, ioprio, 2, 0), EPERM);
    // Queries glibc's thread functions make by tid stay open.
    for nr in [libc::SYS_sched_getaffinity, libc::SYS_sched_getparam] {
        assert_eq!(verdict(&p, nr, 4242, 0), RET_ALLOW);
    }
}

#[test]
fn unix_sockets_only_when_opted_in() {
    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    let unix = libc::AF_UNIX as u64;
    let (stream, dgram) = (libc::SOCK_STREAM as u64, libc::SOCK_DGRAM as u64);
    let seq = libc::SOCK_SEQPACKET as u64 | libc::SOCK_CLOEXEC as u64;
    let (socket, pair) = (libc::SYS_socket, libc::SYS_socketpair);
    for inet in [false, true] {
        let off = build(Options {
            inet,
            unix_sockets: false,
        })
        .unwrap();
        assert_eq!(verdict(&off, socket, unix, stream), EPERM);
        assert_eq!(verdict(&off, socket, unix, dgram), EPERM);
        assert_eq!(verdict(&off, pair, unix, stream), RET_ALLOW);
        assert_eq!(verdict(&off, pair, unix, seq), RET_ALLOW);
        assert_eq!(verdict(&off, pair, unix, dgram), EPERM);
        let on = build(Options {
            inet,
            unix_sockets: true,
        })
        .unwrap();
        assert_eq!(verdict(&on, socket, unix, stream), RET_ALLOW);
        assert_eq!(verdict(&on, socket, unix, dgram), RET_ALLOW);
        assert_eq!(verdict(&on, pair, unix, dgram), RET_ALLOW);
        let inet_verdict = if inet { RET_ALLOW } else { EPERM };
        for f in [&off, &on] {
            assert_eq!(
                verdict(f, socket, libc::AF_INET as u64, stream),
                inet_verdict
            );
            assert_eq!(verdict(f, socket, libc::AF_NETLINK as u64, dgram), EPERM);
            assert_eq!(verdict(f, pair, libc::AF_INET as u64, stream), EPERM);
        }
    }
}

#[test]
fn wrong_arch_is_killed_and_x32_refused() {
    let ours = build(Options::default()).unwrap();
    assert_eq!(run(&ours, &data(0, 0x4000_0003, [0; 6])), RET_KILL_PROCESS);
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        run(
            &ours,
            &data(
                X32_SYSCALL_BIT | libc::SYS_ptrace as u32,
                AUDIT_ARCH,
                [0; 6]
            )
        ),
        RET_ERRNO | libc::ENOSYS as u32
    );
}

#[test]
fn compact_and_allowed_path_is_short() {
    for opts in all_options() {
        let ours = build(opts).unwrap();
        let list = deny_list(opts);
        let (flat, _) = seccompiler_reference(opts);
        assert!(
            ours.len() < flat.len(),
            "ours {} vs flat {}",
            ours.len(),
            flat.len()
        );
        // Instructions executed for allowed syscalls: a frequent one and
        // the worst case over every unlisted number.
        let steps = |nr: u32| {
            let (verdict, steps) = run_counted(&ours, &data(nr, AUDIT_ARCH, [0; 6]));
            assert_eq!(verdict, RET_ALLOW, "nr {nr}");
            steps
        };
        let read = steps(libc::SYS_read as u32);
        let allowed: Vec<u32> = (0..480)
            .filter(|nr| !list.iter().any(|(l, _)| l == nr))
            .collect();
        let worst = allowed.iter().map(|nr| steps(*nr)).max().unwrap();
        eprintln!(
            "{opts:?}: {} listed, {} instructions (seccompiler {}); allowed path: read {read}, worst {worst}",
            list.len(),
            ours.len(),
            flat.len()
        );
        assert!(read < 16, "read took {read} instructions");
        assert!(worst < 16, "an allowed syscall took {worst} instructions");
    }
}
