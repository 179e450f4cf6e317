//! Finding a test's processes by a marker, shared by the integration
//! tests (`common`) and the crate's unit tests, which include this file.

/// Live processes whose command line or environment contains `mark`
/// (zombies have neither, so they do not count here).
pub fn procs_with(mark: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        for what in ["cmdline", "environ"] {
            if let Ok(bytes) = std::fs::read(format!("/proc/{pid}/{what}"))
                && bytes.windows(mark.len()).any(|w| w == mark.as_bytes())
            {
                found.push(pid);
                break;
            }
        }
    }
    found
}
