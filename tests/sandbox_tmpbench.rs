mod sandbox_common;
use sandbox_common::*;
use std::time::Instant;
#[test]
fn bench() {
    let r = root();
    let sb = sandbox(&r.path);
    let n = 200;
    for (label, sandboxed) in [("sandboxed", true), ("plain", false)] {
        let t = Instant::now();
        let mut spawn_total = 0u128;
        for _ in 0..n {
            let run = std::sync::Arc::new(sb.for_run().unwrap());
            let mut s = spec(&run, &r.path, &["/bin/true"]);
            if !sandboxed { s.sandbox = None; }
            let t1 = Instant::now();
            let c = agent_exec::spawn::spawn(&s).unwrap();
            spawn_total += t1.elapsed().as_micros();
            let mut st = 0;
            unsafe { libc::waitpid(c.pid, &mut st, 0) };
        }
        eprintln!("{label}: total per run {} us, spawn() {} us", t.elapsed().as_micros() / n, spawn_total / n as u128);
    }
    let t = Instant::now();
    for _ in 0..n { let _r = sb.for_run().unwrap(); }
    eprintln!("for_run+drop: {} us", t.elapsed().as_micros() / n);
}
