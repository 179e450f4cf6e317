mod exec_common;
use agent_exec::exec::{CancelToken, run};
use exec_common::{marker, sh};
#[test]
fn speed() {
    let m = marker();
    let mut v = Vec::new();
    for _ in 0..100 {
        let mut spec = sh("true", &m);
        spec.child.program = std::ffi::CString::new("/bin/true").unwrap();
        spec.child.argv = vec![std::ffi::CString::new("true").unwrap()];
        let out = run(spec, &CancelToken::new()).unwrap();
        v.push(out.duration);
    }
    v.sort();
    eprintln!("min {:?} med {:?} p90 {:?}", v[0], v[50], v[90]);
}
