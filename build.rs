//! Links the `agent-exec` binary with packed relative relocations
//! (`-z pack-relative-relocs`, DT_RELR) where the toolchain can.
//!
//! Why: the binary is a position-independent executable with about 17,000
//! relative relocations, and the dynamic loader reads their 420 KB RELA
//! table on every start; packed, the table is 5 KB. For a one-shot CLI
//! call that is a measurable part of its start (BENCHMARKS.md, "Start-up").
//! ASLR and full RELRO stay as they were.
//!
//! Only for a native Linux GNU build whose C toolchain links a test
//! program with the flag: a DT_RELR binary needs glibc 2.36 or later to
//! run, which the toolchain's own glibc then is. Anything else (cross
//! builds, older linkers, musl) links as before.

use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    if links_with_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether `cc` links and the result runs with DT_RELR here.
fn links_with_relr() -> bool {
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        return false;
    };
    let out = std::path::Path::new(&out_dir).join("relr-probe");
    let src = std::path::Path::new(&out_dir).join("relr-probe.c");
    if std::fs::write(&src, "int main(void) { return 0; }\n").is_err() {
        return false;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let linked = Command::new(cc)
        .args(["-pie", "-fPIE", "-Wl,-z,pack-relative-relocs", "-o"])
        .arg(&out)
        .arg(&src)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    linked && Command::new(&out).status().is_ok_and(|s| s.success())
}
