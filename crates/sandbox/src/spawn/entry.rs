//! The process entry of the small thin client, without the standard
//! library's runtime start.
//!
//! Before `main`, std's start asks glibc for the main thread's stack
//! (which reads `/proc/self/maps`), installs SIGSEGV and SIGBUS handlers
//! with an alternate stack, ignores SIGPIPE and makes sure descriptors 0-2
//! are open. On the project's machine an empty program runs in 1.40x a
//! bare `true`'s time with it and 1.21x without, and a call forwarded by
//! `agent-exec-client` took 0.12-0.20 ms less without it (BENCHMARKS.md).
//! `agent-exec` keeps std's start: a one-shot call showed no difference
//! without it (-0.04 to +0.07 ms, paired).
//!
//! [`entry!`](crate::entry) defines the C `main` on glibc Linux, where std
//! still reads the command line from the loader (an init-array function),
//! and [`run_main`] keeps what of std's start the client relies on:
//! - descriptors 0-2 open (`/dev/null` for a closed one);
//! - SIGPIPE ignored, so a reader that went away is an `EPIPE` error and
//!   not death (std's `Command` still gives children the default, as
//!   before);
//! - a panic answered with exit status 101, after the panic hook printed
//!   it, as std's start does;
//! - standard output flushed before the exit.
//!
//! Left out: the message of a main-thread stack overflow (the process then
//! dies of a plain SIGSEGV), and the main thread's name in panic messages.

use std::ffi::c_int;

/// Runs `body` as a process's `main` (see the module's notes) and returns
/// the exit status for the C runtime's `exit`.
pub fn run_main(body: fn() -> u8) -> c_int {
    super::sys::ensure_stdio_open();
    // SAFETY: sets SIGPIPE's disposition to SIG_IGN, which installs no
    // handler: no code of ours can run in a signal's context. Done first
    // thing in the process, as std's start does it.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let code = match std::panic::catch_unwind(body) {
        Ok(code) => c_int::from(code),
        Err(_) => 101,
    };
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code
}

/// Defines the binary's `main`: `body` (a `fn() -> u8`) through
/// [`run_main`] on glibc Linux, std's `main` elsewhere. The binary's root
/// module asks for no std `main` on glibc Linux, outside its unit tests
/// (whose harness has its own `main`):
/// `#![cfg_attr(all(target_os = "linux", target_env = "gnu", not(test)), no_main)]`,
/// with the macro invoked under `#[cfg(not(test))]`.
#[macro_export]
macro_rules! entry {
    ($body:path) => {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        #[unsafe(no_mangle)]
        extern "C" fn main(
            _argc: ::std::ffi::c_int,
            _argv: *const *const ::std::ffi::c_char,
        ) -> ::std::ffi::c_int {
            $crate::run_main($body)
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        fn main() -> ::std::process::ExitCode {
            ::std::process::ExitCode::from($body())
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_s_status_is_the_process_s_and_a_panic_is_101() {
        assert_eq!(run_main(|| 7), 7);
        assert_eq!(run_main(|| 0), 0);
        assert_eq!(run_main(|| panic!("a bug")), 101);
    }
}
