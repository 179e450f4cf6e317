//! Change notification: an inotify or fanotify watch on a directory outside
//! the root would report the names of files other users create there
//! (Landlock has no hook for watches). The child learns none of them, and
//! `tail -f` still follows a file by polling.

mod contain_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use contain_common::{Deployment, Project, missing, outside_dir, stdout, token};

/// Watches `dir` with inotify and fanotify for a second and prints the raw
/// events, which carry the created files' names.
fn probe(dir: &str) -> String {
    format!(
        r#"import ctypes, os, select, time
libc = ctypes.CDLL(None, use_errno=True)
libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
D = b"{dir}"
def report(name, r):
    print(name, "refused %d" % ctypes.get_errno() if r == -1 else "ok")
    return r
fds = {{}}
fd = report("inotify", libc.inotify_init1(0))
if fd != -1 and report("inotify-watch", libc.inotify_add_watch(fd, D, 0x100)) != -1:
    fds[fd] = "inotify-event"
# FAN_CLASS_NOTIF with directory file handles and names, as unprivileged
# fanotify (5.13+) requires; FAN_CREATE on the directory's inode.
fan = report("fanotify", libc.fanotify_init(0x400 | 0x800, os.O_RDONLY))
if fan != -1 and report("fanotify-mark", libc.fanotify_mark(fan, 1, 0x100, -100, D)) != -1:
    fds[fan] = "fanotify-event"
end = time.time() + 1.0
while fds and time.time() < end:
    ready, _, _ = select.select(list(fds), [], [], 0.1)
    for r in ready:
        print(fds[r], os.read(r, 65536))
"#
    )
}

/// Creates `leak-<tok>-N` files in `dir` every 20 ms until stopped.
struct Creator {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Creator {
    fn start(dir: std::path::PathBuf, tok: String) -> Creator {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) {
                std::fs::write(dir.join(format!("leak-{tok}-{n}")), "x").unwrap();
                n += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Creator {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Creator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn watches_outside_the_root_report_no_names() {
    for dep in Deployment::all() {
        let dir = outside_dir();
        let tok = token();
        let p = Project::new(dep, false);
        p.write("watch.py", &probe(dir.path().to_str().unwrap()));
        let creator = Creator::start(dir.path().to_path_buf(), tok.clone());
        let v = p.run(&["python3", "watch.py"]);
        assert!(
            !stdout(&v).contains(&tok),
            "{dep:?}: the child saw names created outside: {v:#}"
        );
        // Control: unconfined, the same uid sees them.
        let out = p.run_unconfined(&["python3", "watch.py"]);
        drop(creator);
        let text = String::from_utf8_lossy(&out.stdout);
        let saw = |kind: &str| {
            text.lines()
                .any(|l| l.starts_with(kind) && l.contains(&format!("leak-{tok}")))
        };
        assert!(saw("inotify-event"), "{dep:?}: control: {text}");
        if !saw("fanotify-event") {
            missing("unprivileged fanotify (Linux 5.13+), for the fanotify half");
        }
    }
}

#[test]
fn tail_f_follows_by_polling() {
    let script = r#"f="$TMPDIR/followed"
echo first > "$f"
tail -f "$f" > "$TMPDIR/seen" 2>/dev/null &
t=$!
sleep 0.5
echo second >> "$f"
sleep 2
kill $t
cat "$TMPDIR/seen"
"#;
    for dep in Deployment::all() {
        let p = Project::new(dep, false);
        p.write("follow.sh", script);
        let v = p.run(&["bash", "follow.sh"]);
        assert_eq!(stdout(&v), "first\nsecond\n", "{dep:?}: {v:#}");
    }
}
