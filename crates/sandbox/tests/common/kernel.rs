//! The one rule for a test that needs a kernel feature (or host setup) the
//! machine may lack. Shared by the integration tests (`common`) and the
//! crate's unit tests, which include this file.

/// Whether a test that needs `feature` can go on; `present` says whether
/// the host has it. When it does not:
/// - with the `CI` environment variable set, the test fails: a CI host is
///   expected to offer what the tests need, and a skip would read as a
///   pass;
/// - elsewhere it prints `SKIPPED: <test> needs <feature>` on stderr and
///   returns false, and the test returns without asserting anything.
///
/// ```ignore
/// if !require_kernel_feature("Landlock ABI 4 (TCP port rules)", abi >= 4) {
///     return;
/// }
/// ```
pub fn require_kernel_feature(feature: &str, present: bool) -> bool {
    if present {
        return true;
    }
    // The test harness names each test's thread after the test.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} needs {feature}, which this host lacks; under CI that is a failure, not a skip"
    );
    eprintln!("SKIPPED: {test} needs {feature}");
    false
}
