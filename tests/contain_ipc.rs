//! Host-wide IPC objects named by key or name: SysV shared memory,
//! message queues and semaphores, and POSIX message queues. A run leaves
//! none behind, and an object made outside with mode 0666 keeps its
//! content, its messages and its count after a child went for it.

mod contain_common;

use std::collections::BTreeSet;
use std::ffi::CString;

use contain_common::{Deployment, Project, missing, stdout, token};

const SECRET: &str = "outside-secret";

/// SysV objects of `uid` listed in /proc/sysvipc, as (kind, id); with
/// `key`, only those made with it.
fn sysv_of(uid: u32, key: Option<i32>) -> BTreeSet<(&'static str, i32)> {
    let mut out = BTreeSet::new();
    for kind in ["shm", "msg", "sem"] {
        let text = std::fs::read_to_string(format!("/proc/sysvipc/{kind}")).unwrap();
        let mut lines = text.lines();
        let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
        let uid_col = col("uid");
        let key_col = col("key");
        // The id is the second column (shmid, msqid, semid).
        for l in lines {
            let f: Vec<&str> = l.split_whitespace().collect();
            let key_ok = key.is_none_or(|k| f[key_col].parse::<i32>() == Ok(k));
            if f[uid_col].parse::<u32>() == Ok(uid) && key_ok {
                out.insert((kind, f[1].parse().unwrap()));
            }
        }
    }
    out
}

/// Which new objects of `uid` are counted: for uid 0 only those with the
/// probe's own key, as the host's other root processes make (private)
/// objects of their own meanwhile; for other uids every one.
fn only_key(uid: u32, key: i32) -> Option<i32> {
    (uid == 0).then_some(key ^ 0x10_0000)
}

fn remove_sysv(objs: &BTreeSet<(&'static str, i32)>) {
    for (kind, id) in objs {
        // SAFETY: IPC_RMID on an id; a stale one fails harmlessly.
        unsafe {
            match *kind {
                "shm" => libc::shmctl(*id, libc::IPC_RMID, std::ptr::null_mut()),
                "msg" => libc::msgctl(*id, libc::IPC_RMID, std::ptr::null_mut()),
                _ => libc::semctl(*id, 0, libc::IPC_RMID),
            };
        }
    }
}

/// Objects made by the test with mode 0666, holding a secret.
struct Outside {
    key: i32,
    shm: i32,
    msq: i32,
    sem: i32,
    mq_name: CString,
    mq: libc::mqd_t,
    /// POSIX queue name the child tries to create.
    mq_new: CString,
    /// Objects of the child's uid before any run, and the uid.
    before: BTreeSet<(&'static str, i32)>,
    uid: u32,
}

impl Outside {
    /// `None` when the kernel lacks POSIX message queues.
    fn make(uid: u32) -> Option<Outside> {
        let tok = token();
        let key = i32::from_str_radix(&tok[..7], 16).unwrap() | 1;
        let mq_name = CString::new(format!("/ae-contain-{tok}")).unwrap();
        let mq_new = CString::new(format!("/ae-contain-new-{tok}")).unwrap();
        let before = sysv_of(uid, only_key(uid, key));
        let mode = libc::IPC_CREAT | libc::IPC_EXCL | 0o666;
        // SAFETY: plain SysV and POSIX IPC calls on fresh objects; the
        // attached segment is 4096 bytes and written within bounds.
        unsafe {
            let shm = libc::shmget(key, 4096, mode);
            assert!(shm >= 0, "shmget");
            let addr = libc::shmat(shm, std::ptr::null(), 0);
            assert_ne!(addr as isize, -1);
            std::ptr::copy_nonoverlapping(SECRET.as_ptr(), addr as *mut u8, SECRET.len());
            libc::shmdt(addr);
            let msq = libc::msgget(key, mode);
            assert!(msq >= 0, "msgget");
            let mut msg = [0u8; 8 + 64];
            msg[..8].copy_from_slice(&1i64.to_ne_bytes());
            msg[8..8 + SECRET.len()].copy_from_slice(SECRET.as_bytes());
            let r = libc::msgsnd(msq, msg.as_ptr().cast(), SECRET.len(), 0);
            assert_eq!(r, 0, "msgsnd");
            let sem = libc::semget(key, 1, mode);
            assert!(sem >= 0, "semget");
            assert_eq!(libc::semctl(sem, 0, libc::SETVAL, 5), 0);
            let mut out = Outside {
                key,
                shm,
                msq,
                sem,
                mq_name,
                mq: -1,
                mq_new,
                before,
                uid,
            };
            let mq = libc::mq_open(
                out.mq_name.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o666 as libc::mode_t,
                std::ptr::null::<libc::mq_attr>(),
            );
            if mq < 0 {
                return None;
            }
            out.mq = mq;
            // The umask narrowed the mode at creation.
            assert_eq!(libc::fchmod(mq, 0o666), 0);
            assert_eq!(
                libc::mq_send(mq, SECRET.as_ptr().cast(), SECRET.len(), 0),
                0
            );
            Some(out)
        }
    }

    /// (segment starts with the secret, messages queued, semaphore value,
    /// POSIX messages queued, the child's POSIX queue exists).
    fn state(&self) -> (bool, u64, i32, i64, bool) {
        // SAFETY: reads of objects this struct made; buffers sized by type.
        unsafe {
            let addr = libc::shmat(self.shm, std::ptr::null(), libc::SHM_RDONLY);
            assert_ne!(addr as isize, -1);
            let intact =
                std::slice::from_raw_parts(addr as *const u8, SECRET.len()) == SECRET.as_bytes();
            libc::shmdt(addr);
            let mut ds: libc::msqid_ds = std::mem::zeroed();
            assert_eq!(libc::msgctl(self.msq, libc::IPC_STAT, &mut ds), 0);
            let semval = libc::semctl(self.sem, 0, libc::GETVAL);
            let mut attr: libc::mq_attr = std::mem::zeroed();
            assert_eq!(libc::mq_getattr(self.mq, &mut attr), 0);
            let new = libc::mq_open(self.mq_new.as_ptr(), libc::O_RDONLY);
            if new >= 0 {
                libc::mq_close(new);
            }
            (intact, ds.msg_qnum, semval, attr.mq_curmsgs, new >= 0)
        }
    }

    /// The probe: reads and changes the outside objects, makes new ones.
    fn probe(&self) -> String {
        format!(
            r#"import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
K, K2 = {key}, {key2}
CREAT, NOWAIT = 0o1000, 0o4000
def report(name, r):
    print(name, "refused %d" % ctypes.get_errno() if r == -1 else "ok")
    return r
shm = report("shmget-outside", libc.shmget(K, 0, 0))
if shm != -1:
    addr = libc.shmat(shm, None, 0)
    if addr is not None and addr != ctypes.c_void_p(-1).value:
        print("shm-read", ctypes.string_at(addr, 20))
        ctypes.memmove(addr, b"overwritten", 11)
msq = report("msgget-outside", libc.msgget(K, 0))
if msq != -1:
    buf = ctypes.create_string_buffer(128)
    n = libc.msgrcv(msq, buf, 100, 0, NOWAIT)
    if n > 0:
        print("msg-read", buf.raw[8:8 + n])
sem = report("semget-outside", libc.semget(K, 0, 0))
if sem != -1:
    report("semop-outside", libc.semop(sem, (ctypes.c_short * 3)(0, 1, 0), 1))
for key in (0, K2):
    report("shmget-new", libc.shmget(key, 4096, CREAT | 0o666))
    report("msgget-new", libc.msgget(key, CREAT | 0o666))
    report("semget-new", libc.semget(key, 1, CREAT | 0o666))
q = report("mq-outside", libc.mq_open(b"{mq}", 0o4002))
if q != -1:
    buf = ctypes.create_string_buffer(8192)
    n = libc.mq_receive(q, buf, 8192, None)
    if n > 0:
        print("mq-read", buf.raw[:n])
report("mq-new", libc.mq_open(b"{mq_new}", 0o102, 0o666, None))
"#,
            key = self.key,
            key2 = self.key ^ 0x10_0000,
            mq = self.mq_name.to_str().unwrap(),
            mq_new = self.mq_new.to_str().unwrap(),
        )
    }

    /// Objects the child's uid made since `make`.
    fn new_objects(&self) -> BTreeSet<(&'static str, i32)> {
        sysv_of(self.uid, only_key(self.uid, self.key))
            .difference(&self.before)
            .copied()
            .collect()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let mut mine = BTreeSet::from([("shm", self.shm), ("msg", self.msq), ("sem", self.sem)]);
        mine.extend(self.new_objects());
        remove_sysv(&mine);
        // SAFETY: closing and unlinking the queues this test named.
        unsafe {
            libc::mq_close(self.mq);
            libc::mq_unlink(self.mq_name.as_ptr());
            libc::mq_unlink(self.mq_new.as_ptr());
        }
    }
}

#[test]
fn ipc_objects_neither_outlive_the_run_nor_reach_outside_ones() {
    if !std::path::Path::new("/proc/sysvipc/shm").exists() {
        return missing("SysV IPC (CONFIG_SYSVIPC)");
    }
    for dep in Deployment::all() {
        let uid = dep.child_uid();
        let Some(outside) = Outside::make(uid) else {
            return missing("POSIX message queues (CONFIG_POSIX_MQUEUE)");
        };
        let p = Project::new(dep, false);
        p.write("ipc.py", &outside.probe());
        let v = p.run(&["python3", "ipc.py"]);
        assert_eq!(
            outside.state(),
            (true, 1, 5, 1, false),
            "{dep:?}: the outside objects changed or a queue was made: {v:#}"
        );
        assert!(
            outside.new_objects().is_empty(),
            "{dep:?}: the run left SysV objects: {:?} {v:#}",
            outside.new_objects()
        );
        assert!(!stdout(&v).contains(SECRET), "{dep:?}: {v:#}");

        // Control: the same program as the same uid, unconfined, reads and
        // changes all of them and leaves new ones.
        let out = p.run_unconfined(&["python3", "ipc.py"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            outside.state(),
            (false, 0, 6, 0, true),
            "{dep:?}: control: {text}"
        );
        // Three made with the key, three private (not counted for uid 0).
        let made = if uid == 0 { 3 } else { 6 };
        assert_eq!(
            outside.new_objects().len(),
            made,
            "{dep:?}: control: {text}"
        );
        assert!(text.contains(SECRET), "{dep:?}: control: {text}");
    }
}
