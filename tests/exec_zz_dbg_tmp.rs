mod exec_common;
use agent_exec::exec::{CancelToken, run};
use exec_common::{marker, procs_with, sh};
#[test]
fn dbg() {
    let mb = marker();
    let b = std::thread::spawn(move || run(sh("(setsid sh -c 'sleep 1' >/dev/null 2>&1 &); sleep 3", &mb), &CancelToken::new()).unwrap());
    for i in 0..40 {
        let ma = marker();
        let out = run(sh("(setsid sleep 300 >/dev/null 2>&1 &); echo a", &ma), &CancelToken::new()).unwrap();
        assert_eq!(out.stdout.text, "a\n");
        let left = procs_with(&ma);
        if !left.is_empty() {
            for p in &left {
                eprintln!("iter {i} left {p}: {}", std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            for p in &left {
                eprintln!("later {p}: {}", std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default());
            }
            eprintln!("me {}", std::process::id());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    b.join().unwrap();
}
