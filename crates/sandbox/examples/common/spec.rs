//! The run the examples measure: a short command with fixed limits, the
//! same for every example so their figures compare.

use std::ffi::{CString, NulError};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_exec_sandbox::{ExecSpec, RunSandbox};

/// `argv` (the program's path first) run in `cwd` with `PATH` alone in
/// its environment, ten seconds to finish and 1000 characters of output.
pub fn short_run(argv: &[&str], cwd: &Path, sandbox: RunSandbox) -> Result<ExecSpec, NulError> {
    let argv: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(*a))
        .collect::<Result<_, _>>()?;
    Ok(ExecSpec {
        program: argv.first().cloned().unwrap_or_default(),
        argv,
        env: vec![CString::new("PATH=/usr/bin:/bin")?],
        cwd: CString::new(cwd.as_os_str().as_encoded_bytes())?,
        sandbox: Arc::new(sandbox),
        stdin: None,
        timeout: Duration::from_secs(10),
        kill_grace: Duration::from_millis(100),
        drain: Duration::from_millis(100),
        output_chars: 1000,
        hard_limit_bytes: 0,
    })
}
