//! The seccomp program: default allow, a short deny list answered with an
//! errno, compiled once in the parent into classic BPF.
//!
//! What the list refuses, beyond the calls only an administrator needs
//! (mounts, modules, keys, tracing): what Landlock cannot see. Unix
//! sockets (a pathname socket outside the root is reachable by connect,
//! Landlock only governs creating one) unless the policy opts in; calls
//! that act on another process of the same uid by pid (rlimits, nice
//! value, scheduling, memory placement), which are kept to the caller;
//! host-wide objects named by key (SysV IPC, POSIX message queues); and
//! change notification (inotify, fanotify), which watches directories
//! the user can read. `docs/threat-model.md` has the table of decisions.
//!
//! Why a generator of our own rather than seccompiler's output: seccompiler
//! emits one linear chain per syscall, so every allowed syscall of every
//! child walks the whole list (~190 µs per child measured for a flat
//! 170-instruction filter), it has a single match action (we need ENOSYS for
//! `clone3` next to EPERM), and it does not reject x32 syscall numbers, which
//! share `AUDIT_ARCH_X86_64` and would bypass every number-keyed rule. Here
//! the syscall numbers are searched with a balanced binary tree of `jge`
//! (about log2(n) comparisons for an allowed syscall: 12 instructions for
//! `read` with 82 entries), and argument checks use `jeq`/`jset` in one
//! block per distinct check. A unit test cross-checks the verdicts against
//! a filter built by seccompiler from the same list.

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
/// `setpriority`'s "which" for one process (the caller when "who" is 0).
const PRIO_PROCESS: u32 = 0;
/// `ioprio_set`'s "which" for one process (linux/ioprio.h).
const IOPRIO_WHO_PROCESS: u32 = 1;
/// Linux 6.15's `open_tree_attr`, numbered alike on every architecture;
/// the libc crate does not name it yet.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// What the policy opens up in the filter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Non-raw AF_INET/AF_INET6 sockets (Landlock then limits the ports).
    pub inet: bool,
    /// `socket(AF_UNIX)` and datagram socket pairs.
    pub unix_sockets: bool,
}

/// What the filter does with one listed syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Always fail with this errno.
    Errno(u32),
    /// EPERM when arg0 has any namespace flag.
    CloneFlags,
    /// `socket`: AF_UNIX when `unix`, non-raw AF_INET/AF_INET6 when `inet`,
    /// EPERM for everything else. With neither the entry is a plain EPERM.
    SocketDomain { inet: bool, unix: bool },
    /// `socketpair`: AF_UNIX only; without `dgram` only the connected
    /// kinds (stream, seqpacket). A datagram socket, paired or not, can
    /// `sendto` or re-`connect` to any pathname socket it can name.
    SocketPair { dgram: bool },
    /// EPERM unless arg0 is PER_LINUX (0) or the query value.
    Personality,
    /// EPERM for TIOCSTI / TIOCLINUX in arg1.
    IoctlCmd,
    /// EPERM unless arg0 (a pid) is 0, the caller itself.
    SelfPid,
    /// EPERM unless arg0 ("which") is this per-process kind and arg1
    /// ("who") is 0, the caller itself.
    SelfWhich(u32),
}

/// The deny list, sorted by syscall number.
pub fn deny_list(opts: Options) -> Vec<(u32, Check)> {
    let eperm = Check::Errno(libc::EPERM as u32);
    let enosys = Check::Errno(libc::ENOSYS as u32);
    let plain: &[libc::c_long] = &[
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_pidfd_getfd,
        // Memory of another process: advice, reaping a dying one, and
        // comparing its kernel objects (also an oracle of which pids share
        // the uid).
        libc::SYS_process_madvise,
        libc::SYS_process_mrelease,
        libc::SYS_kcmp,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        SYS_OPEN_TREE_ATTR,
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
        // SysV IPC objects are host-wide, keyed by number and outlive the
        // run; none of these has a per-run form.
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmdt,
        libc::SYS_shmctl,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        // POSIX message queues are host-wide names too; the other mq_*
        // calls need a descriptor only mq_open gives.
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        // Unprivileged fanotify (5.13+) reports events on any inode the
        // user can read, and Landlock does not mediate marks.
        libc::SYS_fanotify_init,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_iopl,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_ioperm,
    ];
    let mut list: Vec<(u32, Check)> = plain.iter().map(|nr| (*nr as u32, eperm)).collect();
    list.push((libc::SYS_clone3 as u32, enosys));
    // inotify shows the names of files others create in any directory the
    // user can read, Landlock has no hook for watches; ENOSYS makes
    // watchers (`tail -f`) fall back to polling.
    #[cfg(target_arch = "x86_64")]
    list.push((libc::SYS_inotify_init as u32, enosys));
    list.push((libc::SYS_inotify_init1 as u32, enosys));
    list.push((libc::SYS_clone as u32, Check::CloneFlags));
    let socket = match opts {
        Options {
            inet: false,
            unix_sockets: false,
        } => eperm,
        Options { inet, unix_sockets } => Check::SocketDomain {
            inet,
            unix: unix_sockets,
        },
    };
    list.push((libc::SYS_socket as u32, socket));
    list.push((
        libc::SYS_socketpair as u32,
        Check::SocketPair {
            dgram: opts.unix_sockets,
        },
    ));
    list.push((libc::SYS_personality as u32, Check::Personality));
    list.push((libc::SYS_ioctl as u32, Check::IoctlCmd));
    // Calls that change (or, for prlimit64 and get_robust_list, read
    // behind a same-uid check) another process: only the caller itself.
    // Queries without a uid check (sched_getaffinity, sched_getparam,
    // getpriority, ...) stay open: glibc's pthread functions make them on
    // the caller's own threads by tid.
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
        list.push((nr as u32, Check::SelfPid));
    }
    list.push((libc::SYS_setpriority as u32, Check::SelfWhich(PRIO_PROCESS)));
    list.push((
        libc::SYS_ioprio_set as u32,
        Check::SelfWhich(IOPRIO_WHO_PROCESS),
    ));
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
pub fn build(opts: Options) -> Result<Vec<libc::sock_filter>, SandboxError> {
    build_from(&deny_list(opts))
}

/// The shared returns every handler jumps to.
#[derive(Clone, Copy)]
struct Returns {
    allow: usize,
    eperm: usize,
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
    let ret = Returns { allow, eperm };

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
    // others get one handler block per distinct check, after the tree.
    let mut blocks: Vec<(Check, usize)> = Vec::new();
    let handlers: Vec<usize> = list
        .iter()
        .map(|(_, check)| match check {
            Check::Errno(e) if *e == libc::EPERM as u32 => eperm,
            Check::Errno(e) if *e == libc::ENOSYS as u32 => enosys,
            _ => match blocks.iter().find(|(c, _)| c == check) {
                Some((_, l)) => *l,
                None => {
                    let l = a.label();
                    blocks.push((*check, l));
                    l
                }
            },
        })
        .collect();
    tree(&mut a, list, &handlers, 0, list.len());

    for (check, label) in blocks {
        a.place(label);
        handler(&mut a, check, ret);
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

/// Emits the argument checks of one listed syscall; every path ends in a
/// return or a jump to one.
fn handler(a: &mut Asm, check: Check, ret: Returns) {
    let (allow, eperm) = (Target::Label(ret.allow), Target::Label(ret.eperm));
    match check {
        Check::Errno(e) => a.stmt(BPF_RET_K, RET_ERRNO | (e & 0xffff)),
        Check::CloneFlags => {
            a.stmt(BPF_LD_W_ABS, arg_lo(0));
            a.jump(BPF_JMP_JSET_K, CLONE_NS_FLAGS, eperm, allow);
        }
        Check::SocketDomain { inet, unix } => {
            a.stmt(BPF_LD_W_ABS, arg_lo(0));
            if unix {
                a.jump(BPF_JMP_JEQ_K, libc::AF_UNIX as u32, allow, Target::Next);
            }
            if inet {
                let check_type = a.label();
                let t = Target::Label(check_type);
                a.jump(BPF_JMP_JEQ_K, libc::AF_INET as u32, t, Target::Next);
                a.jump(BPF_JMP_JEQ_K, libc::AF_INET6 as u32, t, eperm);
                a.place(check_type);
                a.stmt(BPF_LD_W_ABS, arg_lo(1));
                a.stmt(BPF_ALU_AND_K, SOCK_TYPE_MASK);
                a.jump(BPF_JMP_JEQ_K, libc::SOCK_RAW as u32, eperm, allow);
            } else {
                a.stmt(BPF_RET_K, RET_ERRNO | libc::EPERM as u32);
            }
        }
        Check::SocketPair { dgram } => {
            a.stmt(BPF_LD_W_ABS, arg_lo(0));
            if dgram {
                a.jump(BPF_JMP_JEQ_K, libc::AF_UNIX as u32, allow, eperm);
            } else {
                a.jump(BPF_JMP_JEQ_K, libc::AF_UNIX as u32, Target::Next, eperm);
                a.stmt(BPF_LD_W_ABS, arg_lo(1));
                a.stmt(BPF_ALU_AND_K, SOCK_TYPE_MASK);
                a.jump(BPF_JMP_JEQ_K, libc::SOCK_STREAM as u32, allow, Target::Next);
                a.jump(BPF_JMP_JEQ_K, libc::SOCK_SEQPACKET as u32, allow, eperm);
            }
        }
        Check::Personality => {
            a.stmt(BPF_LD_W_ABS, arg_lo(0));
            a.jump(BPF_JMP_JEQ_K, 0, allow, Target::Next);
            a.jump(BPF_JMP_JEQ_K, PERSONALITY_QUERY, allow, eperm);
        }
        Check::IoctlCmd => {
            // The kernel reads the ioctl command as an unsigned int.
            a.stmt(BPF_LD_W_ABS, arg_lo(1));
            a.jump(BPF_JMP_JEQ_K, libc::TIOCSTI as u32, eperm, Target::Next);
            a.jump(BPF_JMP_JEQ_K, libc::TIOCLINUX as u32, eperm, allow);
        }
        // pid_t and the "which"/"who" ints are 32-bit: the kernel ignores
        // the upper half of these arguments, so the low word decides.
        Check::SelfPid => {
            a.stmt(BPF_LD_W_ABS, arg_lo(0));
            a.jump(BPF_JMP_JEQ_K, 0, allow, eperm);
        }
        Check::SelfWhich(which) => {
            a.stmt(BPF_LD_W_ABS, arg_lo(0));
            a.jump(BPF_JMP_JEQ_K, which, Target::Next, eperm);
            a.stmt(BPF_LD_W_ABS, arg_lo(1));
            a.jump(BPF_JMP_JEQ_K, 0, allow, eperm);
        }
    }
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
pub(crate) mod tests;
