//! systemd socket activation and readiness notification.
//!
//! Activation (`sd_listen_fds(3)`): the service manager binds the socket,
//! starts the daemon with it as descriptor 3 onwards, and says so in
//! `LISTEN_PID` (this process), `LISTEN_FDS` (how many) and
//! `LISTEN_FDNAMES` (their `FileDescriptorName=`). Readiness
//! (`sd_notify(3)`): one datagram per state to the Unix socket named by
//! `NOTIFY_SOCKET`, a path or (with a leading `@`) an abstract name.

use std::os::unix::net::{UnixDatagram, UnixListener};

use super::ServeError;

/// The name the shipped `agent-exec.socket` gives its descriptor; among
/// several passed sockets, this one is served.
pub const FD_NAME: &str = "agent-exec";

/// The listening socket the service manager passed, if it passed any to
/// this process. `LISTEN_PID` must name this process: descriptors meant for
/// a parent that exec'd this program without clearing the variables are
/// not adopted. The descriptor is marked close-on-exec, so neither the
/// reaper nor a command inherits it.
pub fn inherited_listener() -> Result<Option<(UnixListener, String)>, ServeError> {
    let bad = |reason: String| ServeError::Activation { reason };
    let Ok(pid) = std::env::var("LISTEN_PID") else {
        return Ok(None);
    };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Ok(None);
    }
    let names: Vec<String> = std::env::var("LISTEN_FDNAMES")
        .map(|s| s.split(':').map(str::to_string).collect())
        .unwrap_or_default();
    let mut fds = listenfd::ListenFd::from_env();
    let count = fds.len();
    let index = match count {
        0 => return Err(bad("LISTEN_PID names this process but LISTEN_FDS passes no socket".into())),
        1 => 0,
        _ => names.iter().position(|n| n == FD_NAME).ok_or_else(|| {
            bad(format!(
                "{count} sockets were passed ({}); name the one to serve FileDescriptorName={FD_NAME}",
                names.join(", ")
            ))
        })?,
    };
    let listener = fds
        .take_unix_listener(index)
        .map_err(|e| bad(format!("passed descriptor {}: {e}", 3 + index)))?
        .ok_or_else(|| bad(format!("passed descriptor {} is gone", 3 + index)))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| bad(format!("set_nonblocking: {e}")))?;
    let name = names
        .get(index)
        .cloned()
        .unwrap_or_else(|| "unnamed".into());
    Ok(Some((listener, name)))
}

/// Sends one `sd_notify` state (`READY=1`, `STOPPING=1`, `STATUS=...`) when
/// `NOTIFY_SOCKET` is set; without it there is no one to tell. A failure is
/// logged, never fatal: the daemon serves either way, and systemd reports a
/// `Type=notify` unit that never got `READY=1` on its own.
pub fn notify(state: &str) {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&target, state) {
        tracing::warn!(error = %e, state, "sd_notify failed");
    }
}

fn send(target: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let sock = UnixDatagram::unbound()?;
    let bytes = target.as_bytes();
    let sent = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        sock.send_to_addr(state.as_bytes(), &addr)?
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(target))?
    };
    if sent != state.len() {
        return Err(std::io::Error::other("short write"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_reaches_a_path_and_an_abstract_listener() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("agent-exec-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        send(std::ffi::OsStr::new(&format!("@{name}")), "STOPPING=1").unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
    }
}
