//! The seccomp program: default allow, a short deny list answered with an
//! errno, compiled once in the parent into classic BPF.
//!
//! Why a generator of our own rather than seccompiler's output: seccompiler
//! emits one linear chain per syscall, so every allowed syscall of every
//! child walks the whole list (~190 µs per child measured for a flat
//! 170-instruction filter), it has a single match action (we need ENOSYS for
//! `clone3` next to EPERM), and it does not reject x32 syscall numbers, which
//! share `AUDIT_ARCH_X86_64` and would bypass every number-keyed rule. Here
//! the syscall numbers are searched with a balanced binary tree of `jge`
//! (about log2(n) comparisons for an allowed syscall), and argument checks
//! use `jset`. A unit test cross-checks the verdicts against a filter built
//! by seccompiler from the same list.

use super::SandboxError;

// Classic BPF opcodes (linux/filter.h).
// BPF_LD | BPF_W | BPF_ABS
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_JMP_JSET_K: u16 = 0x05 | 0x40;
const BPF_ALU_AND_K: u16 = 0x04 | 0x50;
const BPF_RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

// Offsets into `struct seccomp_data`; both supported targets are little
// endian, so the low 32 bits of argument i sit at 16 + 8 * i.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn arg_lo(i: u32) -> u32 {
    16 + 8 * i
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// x32 syscalls are x86_64 numbers with this bit set.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Every namespace flag `clone` accepts (CLONE_NEWTIME only exists in
/// `clone3`/`unshare`; in `clone` its bit is part of the exit signal).
pub const CLONE_NS_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

const PERSONALITY_QUERY: u32 = 0xffff_ffff;
const SOCK_TYPE_MASK: u32 = 0xf;

/// What the filter does with one listed syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Always fail with this errno.
    Errno(u32),
    /// EPERM when arg0 has any namespace flag.
    CloneFlags,
    /// `socket`/`socketpair`: only AF_UNIX (plus non-raw AF_INET/AF_INET6
    /// when `inet`).
    SocketDomain { inet: bool },
    /// EPERM unless arg0 is PER_LINUX (0) or the query value.
    Personality,
    /// EPERM for TIOCSTI / TIOCLINUX in arg1.
    IoctlCmd,
}

/// The deny list, sorted by syscall number.
pub fn deny_list(inet: bool) -> Vec<(u32, Check)> {
    let eperm = Check::Errno(libc::EPERM as u32);
    let plain: &[libc::c_long] = &[
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_pidfd_getfd,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_quotactl_fd,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_clock_settime,
        libc::SYS_settimeofday,
        libc::SYS_syslog,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_iopl,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_ioperm,
    ];
    let mut list: Vec<(u32, Check)> = plain.iter().map(|nr| (*nr as u32, eperm)).collect();
    list.push((libc::SYS_clone3 as u32, Check::Errno(libc::ENOSYS as u32)));
    list.push((libc::SYS_clone as u32, Check::CloneFlags));
    list.push((libc::SYS_socket as u32, Check::SocketDomain { inet }));
    list.push((libc::SYS_socketpair as u32, Check::SocketDomain { inet }));
    list.push((libc::SYS_personality as u32, Check::Personality));
    list.push((libc::SYS_ioctl as u32, Check::IoctlCmd));
    list.sort_by_key(|(nr, _)| *nr);
    list.dedup_by_key(|(nr, _)| *nr);
    list
}

/// Jump targets before layout.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    Next,
    Label(usize),
}

enum Op {
    Stmt(u16, u32),
    Jump(u16, u32, Target, Target),
    Label(usize),
}

struct Asm {
    ops: Vec<Op>,
    labels: usize,
}

impl Asm {
    fn label(&mut self) -> usize {
        self.labels += 1;
        self.labels - 1
    }
    fn stmt(&mut self, code: u16, k: u32) {
        self.ops.push(Op::Stmt(code, k));
    }
    fn jump(&mut self, code: u16, k: u32, jt: Target, jf: Target) {
        self.ops.push(Op::Jump(code, k, jt, jf));
    }
    fn place(&mut self, l: usize) {
        self.ops.push(Op::Label(l));
    }

    fn finish(self) -> Result<Vec<libc::sock_filter>, SandboxError> {
        let mut pos = vec![usize::MAX; self.labels];
        let mut n = 0usize;
        for op in &self.ops {
            match op {
                Op::Label(l) => pos[*l] = n,
                _ => n += 1,
            }
        }
        let mut out = Vec::with_capacity(n);
        for op in &self.ops {
            match *op {
                Op::Label(_) => {}
                Op::Stmt(code, k) => out.push(libc::sock_filter {
                    code,
                    jt: 0,
                    jf: 0,
                    k,
                }),
                Op::Jump(code, k, jt, jf) => {
                    let here = out.len() + 1;
                    let off = |t: Target| -> Result<u8, SandboxError> {
                        match t {
                            Target::Next => Ok(0),
                            Target::Label(l) => pos
                                .get(l)
                                .and_then(|p| p.checked_sub(here))
                                .and_then(|d| u8::try_from(d).ok())
                                .ok_or(SandboxError::Seccomp("filter jump out of range".into())),
                        }
                    };
                    out.push(libc::sock_filter {
                        code,
                        jt: off(jt)?,
                        jf: off(jf)?,
                        k,
                    });
                }
            }
        }
        if out.len() > u16::MAX as usize {
            return Err(SandboxError::Seccomp("filter too long".into()));
        }
        Ok(out)
    }
}

/// Builds the program for the build target's architecture.
pub fn build(inet: bool) -> Result<Vec<libc::sock_filter>, SandboxError> {
    build_from(&deny_list(inet))
}

fn build_from(list: &[(u32, Check)]) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let mut a = Asm {
        ops: Vec::new(),
        labels: 0,
    };
    let allow = a.label();
    let eperm = a.label();
    let kill = a.label();
    let enosys = a.label();

    a.stmt(BPF_LD_W_ABS, OFF_ARCH);
    a.jump(BPF_JMP_JEQ_K, AUDIT_ARCH, Target::Next, Target::Label(kill));
    a.stmt(BPF_LD_W_ABS, OFF_NR);
    #[cfg(target_arch = "x86_64")]
    a.jump(
        BPF_JMP_JGE_K,
        X32_SYSCALL_BIT,
        Target::Label(enosys),
        Target::Next,
    );

    // Plain EPERM/ENOSYS entries jump straight to the shared returns; the
    // others get a handler block after the tree.
    let handlers: Vec<usize> = list
        .iter()
        .map(|(_, check)| match check {
            Check::Errno(e) if *e == libc::EPERM as u32 => eperm,
            Check::Errno(e) if *e == libc::ENOSYS as u32 => enosys,
            _ => a.label(),
        })
        .collect();
    tree(&mut a, list, &handlers, 0, list.len());

    for ((_, check), label) in list.iter().zip(&handlers) {
        if *label == eperm || *label == enosys {
            continue;
        }
        a.place(*label);
        match *check {
            Check::Errno(e) => a.stmt(BPF_RET_K, RET_ERRNO | (e & 0xffff)),
            Check::CloneFlags => {
                a.stmt(BPF_LD_W_ABS, arg_lo(0));
                a.jump(
                    BPF_JMP_JSET_K,
                    CLONE_NS_FLAGS,
                    Target::Label(eperm),
                    Target::Label(allow),
                );
            }
            Check::SocketDomain { inet } => {
                a.stmt(BPF_LD_W_ABS, arg_lo(0));
                a.jump(
                    BPF_JMP_JEQ_K,
                    libc::AF_UNIX as u32,
                    Target::Label(allow),
                    Target::Next,
                );
                if inet {
                    let check_type = a.label();
                    a.jump(
                        BPF_JMP_JEQ_K,
                        libc::AF_INET as u32,
                        Target::Label(check_type),
                        Target::Next,
                    );
                    a.jump(
                        BPF_JMP_JEQ_K,
                        libc::AF_INET6 as u32,
                        Target::Label(check_type),
                        Target::Label(eperm),
                    );
                    a.place(check_type);
                    a.stmt(BPF_LD_W_ABS, arg_lo(1));
                    a.stmt(BPF_ALU_AND_K, SOCK_TYPE_MASK);
                    a.jump(
                        BPF_JMP_JEQ_K,
                        libc::SOCK_RAW as u32,
                        Target::Label(eperm),
                        Target::Label(allow),
                    );
                } else {
                    a.stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32);
                }
            }
            Check::Personality => {
                a.stmt(BPF_LD_W_ABS, arg_lo(0));
                a.jump(BPF_JMP_JEQ_K, 0, Target::Label(allow), Target::Next);
                a.jump(
                    BPF_JMP_JEQ_K,
                    PERSONALITY_QUERY,
                    Target::Label(allow),
                    Target::Label(eperm),
                );
            }
            Check::IoctlCmd => {
                // The kernel reads the ioctl command as an unsigned int.
                a.stmt(BPF_LD_W_ABS, arg_lo(1));
                a.jump(
                    BPF_JMP_JEQ_K,
                    libc::TIOCSTI as u32,
                    Target::Label(eperm),
                    Target::Next,
                );
                a.jump(
                    BPF_JMP_JEQ_K,
                    libc::TIOCLINUX as u32,
                    Target::Label(eperm),
                    Target::Label(allow),
                );
            }
        }
    }
    a.place(allow);
    a.stmt(BPF_RET_K, RET_ALLOW);
    a.place(eperm);
    a.stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32);
    a.place(kill);
    a.stmt(BPF_RET_K, RET_KILL_PROCESS);
    a.place(enosys);
    a.stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32);
    a.finish()
}

/// Emits a binary search over `list[lo..hi]` (sorted); the accumulator
/// holds the syscall number. Small ranges become a run of `jeq`.
fn tree(a: &mut Asm, list: &[(u32, Check)], handlers: &[usize], lo: usize, hi: usize) {
    const LEAF: usize = 4;
    if hi - lo <= LEAF {
        for i in lo..hi {
            a.jump(
                BPF_JMP_JEQ_K,
                list[i].0,
                Target::Label(handlers[i]),
                Target::Next,
            );
        }
        a.stmt(BPF_RET_K, RET_ALLOW);
        return;
    }
    let mid = lo + (hi - lo) / 2;
    let right = a.label();
    a.jump(
        BPF_JMP_JGE_K,
        list[mid].0,
        Target::Label(right),
        Target::Next,
    );
    tree(a, list, handlers, lo, mid);
    a.place(right);
    tree(a, list, handlers, mid, hi);
}

#[cfg(test)]
// The ioctl request type differs between libc flavours, so casts that are
// no-ops here are not everywhere.
#[allow(clippy::unnecessary_cast)]
pub(crate) mod tests {
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
    fn seccompiler_reference(inet: bool) -> (Vec<libc::sock_filter>, Vec<libc::sock_filter>) {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond,
            SeccompFilter, SeccompRule, TargetArch,
        };
        let arch: TargetArch = std::env::consts::ARCH.try_into().unwrap();
        let mut eperm: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        let mut enosys: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        let c = |i, op, v| Cond::new(i, Len::Dword, op, v).unwrap();
        for (nr, check) in deny_list(inet) {
            let nr = i64::from(nr);
            match check {
                Check::Errno(e) if e == libc::ENOSYS as u32 => {
                    enosys.insert(nr, vec![]);
                }
                Check::Errno(_) => {
                    eperm.insert(nr, vec![]);
                }
                Check::CloneFlags => {
                    let mut rules = Vec::new();
                    for bit in 0..32 {
                        let f = 1u64 << bit;
                        if u64::from(CLONE_NS_FLAGS) & f != 0 {
                            rules.push(SeccompRule::new(vec![c(0, Op::MaskedEq(f), f)]).unwrap());
                        }
                    }
                    eperm.insert(nr, rules);
                }
                Check::SocketDomain { inet } => {
                    let mut rules = Vec::new();
                    let mut conds = vec![c(0, Op::Ne, libc::AF_UNIX as u64)];
                    if inet {
                        conds.push(c(0, Op::Ne, libc::AF_INET as u64));
                        conds.push(c(0, Op::Ne, libc::AF_INET6 as u64));
                        for dom in [libc::AF_INET, libc::AF_INET6] {
                            rules.push(
                                SeccompRule::new(vec![
                                    c(0, Op::Eq, dom as u64),
                                    c(1, Op::MaskedEq(0xf), libc::SOCK_RAW as u64),
                                ])
                                .unwrap(),
                            );
                        }
                    }
                    rules.push(SeccompRule::new(conds).unwrap());
                    eperm.insert(nr, rules);
                }
                Check::Personality => {
                    eperm.insert(
                        nr,
                        vec![
                            SeccompRule::new(vec![c(0, Op::Ne, 0), c(0, Op::Ne, 0xffff_ffff)])
                                .unwrap(),
                        ],
                    );
                }
                Check::IoctlCmd => {
                    eperm.insert(
                        nr,
                        vec![
                            SeccompRule::new(vec![c(1, Op::Eq, libc::TIOCSTI as u64)]).unwrap(),
                            SeccompRule::new(vec![c(1, Op::Eq, libc::TIOCLINUX as u64)]).unwrap(),
                        ],
                    );
                }
            }
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

    #[test]
    fn matches_seccompiler_reference() {
        for inet in [false, true] {
            let ours = build(inet).unwrap();
            let (ref_eperm, ref_enosys) = seccompiler_reference(inet);
            let arg_values: [u64; 12] = [
                0,
                1,
                2,
                3,
                10,
                16,
                40,
                0xffff_ffff,
                libc::SIGCHLD as u64,
                libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64,
                (libc::CLONE_VM | libc::CLONE_VFORK) as u64,
                libc::TIOCSTI as u64,
            ];
            let mut compared = 0;
            for nr in 0..470u32 {
                for a0 in arg_values {
                    for a1 in [
                        0u64,
                        libc::SOCK_RAW as u64,
                        libc::SOCK_STREAM as u64,
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
                            "nr={nr} a0={a0:#x} a1={a1:#x} inet={inet}"
                        );
                        compared += 1;
                    }
                }
            }
            assert!(compared > 30_000);
        }
    }

    #[test]
    fn wrong_arch_is_killed_and_x32_refused() {
        let ours = build(false).unwrap();
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
        let ours = build(true).unwrap();
        let (flat, _) = seccompiler_reference(true);
        eprintln!(
            "filter: ours {} instructions, seccompiler {}",
            ours.len(),
            flat.len()
        );
        assert!(
            ours.len() < flat.len(),
            "ours {} vs flat {}",
            ours.len(),
            flat.len()
        );
        // Instructions executed for an allowed, frequent syscall.
        let d = data(libc::SYS_read as u32, AUDIT_ARCH, [0; 6]);
        let (verdict, steps) = run_counted(&ours, &d);
        assert_eq!(verdict, RET_ALLOW);
        assert!(steps < 16, "allowed syscall took {steps} instructions");
    }
}
