//! The child's setup sequence as data: [`STEPS`] is the one order the child
//! walks between clone and exec, and [`Step`] is also what a failure
//! reports over the status pipe, so the step that ran and the step that is
//! named in an error can never disagree.
//!
//! Steps that do not apply to a child (no sandbox, no Landlock, a
//! non-root supervisor) are skipped by the walker in `child.rs`; they keep
//! their place in the table.

/// One step of the child's setup, in the order of [`STEPS`]. The values
/// travel over the status pipe (parent and child are the same binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Step {
    /// Every signal handler back to default, the mask cleared.
    Signals = 1,
    /// Own session and process group, no controlling terminal.
    Setsid,
    /// SIGKILL when the supervisor dies.
    ParentDeath,
    /// The pipes onto 0, 1 and 2.
    Stdio,
    /// Every other descriptor close-on-exec.
    CloseFds,
    /// Write itself into the run's cgroups it was not born in.
    CgroupJoin,
    Rlimit,
    /// The sandbox's user namespace, for a non-root supervisor's runs:
    /// the capabilities in it let the child make the namespaces below.
    JoinUser,
    /// A mount and an IPC namespace of the child's own.
    Unshare,
    /// The sandbox's empty network namespace, for runs without network.
    JoinNetwork,
    /// Every mount of the new namespace private (no propagation to the
    /// host).
    MountPrivate,
    /// The private `/tmp`, `/var/tmp` and `/dev/shm`; the host's `/run`,
    /// `/home` and `/root` covered; granted paths beneath them kept.
    MountView,
    CapAmbient,
    CapBounding,
    Securebits,
    Setgroups,
    Setgid,
    Setuid,
    /// The uid change cleared the parent-death signal: armed again.
    ParentDeathRearm,
    /// Every remaining capability dropped.
    Capset,
    NoNewPrivs,
    Chdir,
    LandlockCreate,
    LandlockAddRule,
    /// The rule for the child's own `/proc/<pid>`.
    ProcSelf,
    LandlockRestrict,
    Seccomp,
    Exec,
}

/// The order of the child's setup. Why each step sits where it does is
/// spelt out (and checked) in this module's tests:
/// - handlers reset before anything else, so no supervisor handler can run
///   on the child's stack once signals are unblocked;
/// - cgroup join and rlimits need root's rights: before the privilege drop;
/// - a non-root supervisor's child enters the sandbox's user namespace
///   after its cgroup join and rlimits (both checked against the host's
///   credentials) and before it makes or joins any other namespace, which
///   its capabilities there allow;
/// - the namespaces after the cgroup join (the kernel charges their memory
///   to the run's cgroup) and before the privilege drop (CAP_SYS_ADMIN);
///   the tree is private before anything is mounted, and every mount is
///   in place before `chdir` resolves the working directory and before
///   Landlock (which names the private `/tmp` and forbids mounting);
/// - bounding set and securebits need CAP_SETPCAP: before the uid change;
///   groups and gid before the uid, which gives up the right to change them;
/// - `no_new_privs` before Landlock and seccomp, which require it of an
///   unprivileged process;
/// - `chdir` after the uid change, so the child user's permissions apply;
/// - seccomp last before exec: the filter refuses nothing exec needs.
pub(crate) const STEPS: [Step; 28] = [
    Step::Signals,
    Step::Setsid,
    Step::ParentDeath,
    Step::Stdio,
    Step::CloseFds,
    Step::CgroupJoin,
    Step::Rlimit,
    Step::JoinUser,
    Step::Unshare,
    Step::JoinNetwork,
    Step::MountPrivate,
    Step::MountView,
    Step::CapAmbient,
    Step::CapBounding,
    Step::Securebits,
    Step::Setgroups,
    Step::Setgid,
    Step::Setuid,
    Step::ParentDeathRearm,
    Step::Capset,
    Step::NoNewPrivs,
    Step::Chdir,
    Step::LandlockCreate,
    Step::LandlockAddRule,
    Step::ProcSelf,
    Step::LandlockRestrict,
    Step::Seccomp,
    Step::Exec,
];

impl Step {
    /// The name an error reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Step::Signals => "signals",
            Step::Setsid => "setsid",
            Step::ParentDeath | Step::ParentDeathRearm => "parent_death_signal",
            Step::Stdio => "stdio",
            Step::CloseFds => "close_fds",
            Step::CgroupJoin => "cgroup_join",
            Step::Rlimit => "rlimit",
            Step::JoinUser => "join_user_namespace",
            Step::Unshare => "unshare_namespaces",
            Step::JoinNetwork => "join_network_namespace",
            Step::MountPrivate => "mount_private",
            Step::MountView => "mount_view",
            Step::CapAmbient => "capabilities_ambient",
            Step::CapBounding => "capabilities_bounding",
            Step::Securebits => "securebits",
            Step::Setgroups => "setgroups",
            Step::Setgid => "setgid",
            Step::Setuid => "setuid",
            Step::Capset => "capset",
            Step::NoNewPrivs => "no_new_privs",
            Step::Chdir => "chdir",
            Step::LandlockCreate => "landlock_create_ruleset",
            Step::LandlockAddRule => "landlock_add_rule",
            Step::ProcSelf => "landlock_proc_self",
            Step::LandlockRestrict => "landlock_restrict_self",
            Step::Seccomp => "seccomp",
            Step::Exec => "execve",
        }
    }

    /// The step a status-pipe value names.
    pub(crate) fn from_u32(v: u32) -> Option<Step> {
        STEPS.into_iter().find(|s| *s as u32 == v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(step: Step) -> usize {
        STEPS
            .iter()
            .position(|s| *s == step)
            .unwrap_or_else(|| panic!("{step:?} is not in STEPS"))
    }

    /// (earlier, later, why). Reordering the table against one of these is
    /// a test failure that names the reason.
    const ORDER: &[(Step, Step, &str)] = &[
        (
            Step::Signals,
            Step::Setsid,
            "no supervisor handler may run in the child: handlers reset first",
        ),
        (
            Step::Stdio,
            Step::CloseFds,
            "stdio copies moved above 2 must be marked close-on-exec too",
        ),
        (
            Step::CgroupJoin,
            Step::CapAmbient,
            "writing cgroup.procs needs root's rights: before the privilege drop",
        ),
        (
            Step::CgroupJoin,
            Step::Setuid,
            "writing cgroup.procs needs root's rights: before the uid change",
        ),
        (
            Step::Rlimit,
            Step::CapAmbient,
            "raising a hard rlimit needs CAP_SYS_RESOURCE: before the privilege drop",
        ),
        (
            Step::Rlimit,
            Step::Setuid,
            "raising a hard rlimit needs CAP_SYS_RESOURCE: before the uid change",
        ),
        (
            Step::Rlimit,
            Step::Capset,
            "raising a hard rlimit needs CAP_SYS_RESOURCE: before capset",
        ),
        (
            Step::CgroupJoin,
            Step::Unshare,
            "the namespaces' memory is charged to the cgroup the child is in: join the run's first",
        ),
        (
            Step::CgroupJoin,
            Step::JoinUser,
            "cgroup.procs is checked against the host's credentials: join before entering the user namespace",
        ),
        (
            Step::Rlimit,
            Step::JoinUser,
            "the limits are the host's: set them before entering the user namespace",
        ),
        (
            Step::JoinUser,
            Step::Unshare,
            "a non-root child may make mount and IPC namespaces only with the capabilities of its user namespace",
        ),
        (
            Step::JoinUser,
            Step::JoinNetwork,
            "the runs' network namespace belongs to the user namespace: setns into it needs CAP_SYS_ADMIN there",
        ),
        (
            Step::JoinUser,
            Step::CapBounding,
            "the user namespace's capabilities are dropped like root's: enter it first",
        ),
        (
            Step::JoinUser,
            Step::Capset,
            "the user namespace's capabilities are dropped like root's: enter it first",
        ),
        (Step::JoinUser, Step::Seccomp, "the filter refuses setns"),
        (
            Step::Unshare,
            Step::MountPrivate,
            "only the child's own namespace may be changed",
        ),
        (
            Step::JoinNetwork,
            Step::CapBounding,
            "setns needs CAP_SYS_ADMIN: before the privilege drop",
        ),
        (
            Step::JoinNetwork,
            Step::Setuid,
            "setns needs CAP_SYS_ADMIN: before the uid change",
        ),
        (
            Step::JoinNetwork,
            Step::Capset,
            "setns needs CAP_SYS_ADMIN: before capset",
        ),
        (Step::JoinNetwork, Step::Seccomp, "the filter refuses setns"),
        (
            Step::MountPrivate,
            Step::MountView,
            "a mount under a shared mount would propagate to the host: the tree is private first",
        ),
        (
            Step::MountView,
            Step::CapAmbient,
            "unshare and mount need CAP_SYS_ADMIN: before the privilege drop",
        ),
        (
            Step::MountView,
            Step::CapBounding,
            "unshare and mount need CAP_SYS_ADMIN: before the privilege drop",
        ),
        (
            Step::MountView,
            Step::Setuid,
            "unshare and mount need CAP_SYS_ADMIN: before the uid change",
        ),
        (
            Step::MountView,
            Step::Capset,
            "unshare and mount need CAP_SYS_ADMIN: before capset",
        ),
        (
            Step::MountView,
            Step::Chdir,
            "the mounts change the working directory, and the real one must resolve in the run's own view",
        ),
        (
            Step::MountView,
            Step::LandlockAddRule,
            "the private /tmp's rule names the new mount: it must exist when the rule is added",
        ),
        (
            Step::MountView,
            Step::LandlockRestrict,
            "a Landlock-restricted process may not change its mounts",
        ),
        (
            Step::CapBounding,
            Step::Setuid,
            "dropping the bounding set needs CAP_SETPCAP: before the uid change",
        ),
        (
            Step::Securebits,
            Step::Setuid,
            "locking securebits needs CAP_SETPCAP, and NO_SETUID_FIXUP must hold during the uid change",
        ),
        (
            Step::Setgroups,
            Step::Setuid,
            "after the uid change the groups can no longer be changed",
        ),
        (
            Step::Setgid,
            Step::Setuid,
            "after the uid change the gid can no longer be changed",
        ),
        (
            Step::Setuid,
            Step::ParentDeathRearm,
            "the uid change clears the parent-death signal",
        ),
        (
            Step::Setgid,
            Step::ParentDeathRearm,
            "the gid change clears the parent-death signal",
        ),
        (
            Step::Setuid,
            Step::Capset,
            "with NO_SETUID_FIXUP the uid change keeps capabilities: drop them after it",
        ),
        (
            Step::Setuid,
            Step::Chdir,
            "chdir as the child user, so its own permissions apply",
        ),
        (
            Step::NoNewPrivs,
            Step::LandlockCreate,
            "Landlock requires no_new_privs of an unprivileged process",
        ),
        (
            Step::NoNewPrivs,
            Step::LandlockRestrict,
            "Landlock requires no_new_privs of an unprivileged process",
        ),
        (
            Step::NoNewPrivs,
            Step::Seccomp,
            "seccomp requires no_new_privs of an unprivileged process",
        ),
        (
            Step::LandlockCreate,
            Step::LandlockAddRule,
            "rules go into a created ruleset",
        ),
        (
            Step::ProcSelf,
            Step::LandlockRestrict,
            "every rule is added before the ruleset is enforced",
        ),
        (
            Step::LandlockAddRule,
            Step::LandlockRestrict,
            "every rule is added before the ruleset is enforced",
        ),
        (
            Step::LandlockRestrict,
            Step::Seccomp,
            "the filter is the last layer: nothing after it but exec",
        ),
    ];

    #[test]
    fn the_setup_order_keeps_its_reasons() {
        for (earlier, later, why) in ORDER {
            assert!(
                pos(*earlier) < pos(*later),
                "{earlier:?} must come before {later:?}: {why}"
            );
        }
        assert_eq!(STEPS[0], Step::Signals, "handlers reset before anything");
        assert_eq!(STEPS[STEPS.len() - 1], Step::Exec, "exec ends the setup");
        assert_eq!(
            STEPS[STEPS.len() - 2],
            Step::Seccomp,
            "seccomp last before exec: the filter refuses nothing exec needs"
        );
    }

    #[test]
    fn every_step_is_walked_once_and_reported_by_its_own_value() {
        for (i, step) in STEPS.iter().enumerate() {
            assert!(
                !STEPS[i + 1..].contains(step),
                "{step:?} appears twice in STEPS"
            );
            assert_eq!(Step::from_u32(*step as u32), Some(*step));
        }
        // Values are 1..=N in declaration order, and N steps are walked:
        // no declared step is left out of the table.
        assert_eq!(Step::Exec as u32 as usize, STEPS.len());
        assert_eq!(Step::from_u32(0), None);
        assert_eq!(Step::from_u32(STEPS.len() as u32 + 1), None);
    }
}
