//! 100 MB of output: exact byte counts, truncation, bounded supervisor
//! memory. Its own test binary, so the peak RSS belongs to this run alone.

mod exec_common;

use agent_exec::exec::{CancelToken, Termination, run};
use exec_common::{marker, sh, vm_hwm_kib};

#[test]
fn hundred_megabytes_are_counted_but_not_kept() {
    let m = marker();
    let mut spec = sh(
        "head -c 100000000 /dev/zero | tr '\\0' 'x'; head -c 30000000 /dev/zero | tr '\\0' 'y' >&2",
        &m,
    );
    spec.output_chars = 10_000;
    let before = vm_hwm_kib();
    let out = run(spec, &CancelToken::new()).unwrap();
    let after = vm_hwm_kib();

    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout.bytes, 100_000_000);
    assert_eq!(out.stderr.bytes, 30_000_000);
    assert!(out.stdout.truncated && out.stderr.truncated);
    let x = "x".repeat(5000);
    assert_eq!(
        out.stdout.text,
        format!("{x}\n[... 99990000 bytes omitted ...]\n{x}")
    );
    let y = "y".repeat(5000);
    assert_eq!(
        out.stderr.text,
        format!("{y}\n[... 29990000 bytes omitted ...]\n{y}")
    );
    // Holding the output would take 130 MB; the capture needs well under
    // 1 MB. The bound is loose for allocator and test-harness noise.
    assert!(
        after.saturating_sub(before) < 32 * 1024,
        "peak RSS grew by {} KiB",
        after - before
    );
}
