//! Calls on other processes of the child's uid: a victim outside the
//! sandbox keeps its file-size limit, nice value, CPU affinity, scheduling
//! policy and I/O priority after the child ran prlimit, renice, taskset,
//! chrt and ionice on it; the child cannot learn its limits either. The
//! same tools on the child itself (`ulimit`, `nice`, wrappers that set up
//! a command) keep working.

mod contain_common;

use contain_common::{Deployment, Project, Victim, missing, stdout, which};

/// What the tools change, read from outside the victim.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    fsize_limit: String,
    nice: i64,
    policy: u32,
    cpus: String,
    ioprio: i64,
}

fn seen(pid: u32) -> Seen {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let fsize_limit = limits
        .lines()
        .find(|l| l.starts_with("Max file size"))
        .unwrap()
        .to_string();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name: state is field 3, nice 19, policy 41.
    let after: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let cpus = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    // SAFETY: ioprio_get takes two integers and returns one.
    let ioprio = unsafe {
        libc::syscall(
            libc::SYS_ioprio_get,
            IOPRIO_WHO_PROCESS,
            libc::c_long::from(pid as i32),
        )
    };
    assert!(ioprio >= 0, "ioprio_get({pid})");
    Seen {
        fsize_limit,
        nice: after[16].parse().unwrap(),
        policy: after[38].parse().unwrap(),
        cpus,
        ioprio,
    }
}

/// The highest CPU the victim may run on, if it may run on more than one.
fn last_of_several_cpus(pid: u32) -> Option<u32> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(pid as i32)).ok()?;
    let cpus: Vec<u32> = (0..nix::sched::CpuSet::count() as u32)
        .filter(|c| set.is_set(*c as usize).unwrap_or(false))
        .collect();
    (cpus.len() > 1).then(|| *cpus.last().unwrap())
}

/// Every tool aimed at `pid` (its own process group), and at the whole
/// uid when `user_wide`.
fn attack(pid: u32, uid: u32, cpu: u32, user_wide: bool) -> String {
    let mask = format!("{:x}", 1u64 << cpu);
    let user = if user_wide {
        format!("renice -n 17 -u {uid}\n")
    } else {
        String::new()
    };
    format!(
        "prlimit --pid {pid} --fsize --noheadings --raw && echo prlimit-query-answered\n\
         prlimit --pid {pid} --fsize=0:0\n\
         renice -n 17 -p {pid}\n\
         renice -n 17 -g {pid}\n\
         {user}\
         taskset -p {mask} {pid}\n\
         chrt -b -p 0 {pid}\n\
         ionice -c 3 -p {pid}\n\
         true\n"
    )
}

#[test]
fn an_outside_process_of_the_same_uid_keeps_its_limits_nice_and_cpus() {
    for tool in ["prlimit", "renice", "taskset", "chrt", "ionice"] {
        if which(tool).is_none() {
            return missing(&format!("{tool} (util-linux)"));
        }
    }
    for dep in Deployment::all() {
        let uid = dep.child_uid();
        let victim = Victim::start(uid);
        let Some(cpu) = last_of_several_cpus(victim.pid()) else {
            return missing("a second CPU, to see an affinity change");
        };
        let before = seen(victim.pid());
        let p = Project::new(dep, false);
        p.write("attack.sh", &attack(victim.pid(), uid, cpu, true));
        let v = p.run(&["bash", "attack.sh"]);
        assert_eq!(seen(victim.pid()), before, "{dep:?}: {v:#}");
        assert!(
            !stdout(&v).contains("prlimit-query-answered"),
            "{dep:?}: the child read another process's limits: {v:#}"
        );

        // Control: the same tools as the same uid without the sandbox do
        // change a victim (not the whole uid: that would renice the host's
        // other processes of it).
        let control = Victim::start(uid);
        let before = seen(control.pid());
        p.write("control.sh", &attack(control.pid(), uid, cpu, false));
        let out = p.run_unconfined(&["bash", "control.sh"]);
        let after = seen(control.pid());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("prlimit-query-answered"), "{dep:?}: {text}");
        assert_ne!(after.fsize_limit, before.fsize_limit, "{dep:?}: {out:?}");
        assert_eq!(after.nice, 17, "{dep:?}: {out:?}");
        assert_eq!(after.cpus, cpu.to_string(), "{dep:?}: {out:?}");
        assert_eq!(after.policy, libc::SCHED_BATCH as u32, "{dep:?}: {out:?}");
        assert_ne!(after.ioprio, before.ioprio, "{dep:?}: {out:?}");
    }
}

#[test]
fn the_child_still_sets_its_own_limits_and_priority() {
    let script = "ulimit -n 100 && ulimit -n\n\
                  ulimit -f 2048 && ulimit -f\n\
                  nice -n 5 nice\n\
                  prlimit --nofile=50:50 sh -c 'ulimit -n'\n\
                  taskset -c 0 echo pinned\n\
                  ionice -c 3 echo idle-io\n\
                  chrt -b 0 echo batch\n";
    for dep in Deployment::all() {
        let p = Project::new(dep, false);
        p.write("own.sh", script);
        let v = p.run(&["bash", "own.sh"]);
        assert_eq!(v["exit_code"], 0, "{dep:?}: {v:#}");
        assert_eq!(
            stdout(&v),
            "100\n2048\n5\n50\npinned\nidle-io\nbatch\n",
            "{dep:?}: {v:#}"
        );
    }
}
