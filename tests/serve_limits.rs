//! What a client can make the daemon hold: connections and half-sent lines
//! are capped, an over-long line ends its connection, and memory taken by a
//! flood is bounded while it lasts and given back after.

mod serve_common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::json;
use serve_common::*;

/// A connection that the daemon refused: one BUSY line, then the end.
fn assert_refused_busy(s: UnixStream) {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_valid_result(&v);
    assert_eq!(error_type(&v), "BUSY", "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("connections are open"),
        "{v}"
    );
    line.clear();
    match r.read_line(&mut line) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the refused connection stayed open: {other:?} {line:?}"),
    }
}

/// Whether a new connection is served now (not refused for lack of room,
/// which happens until the daemon has seen a closed one go).
fn served(fx: &Fixture) -> bool {
    let mut c = fx.connect();
    let line = json!({"id": "x", "tool": "run_shell", "args": {"command": "echo room"}});
    c.send_raw_lossy(format!("{line}\n").as_bytes());
    c.recv_or_closed().is_some_and(|r| r["ok"] == true)
}

#[test]
fn connections_over_the_cap_are_answered_busy_and_closed() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&["--max-connections", "8"]);
    // Every held connection is served (and so counted) before the flood.
    // The start-up probe's connection may still count for a moment.
    let mut held: Vec<Client> = Vec::new();
    for _ in 0..1000 {
        if held.len() == 8 {
            break;
        }
        let mut c = fx.connect();
        c.send_raw_lossy(b"{\"tool\":\"run_shell\",\"args\":{\"command\":\"echo held\"}}\n");
        match c.recv_or_closed() {
            Some(r) if r["ok"] == true => held.push(c),
            Some(r) => assert_eq!(error_type(&r), "BUSY", "{r}"),
            None => panic!("closed without an answer"),
        }
    }
    assert_eq!(held.len(), 8, "the daemon never had room for 8 connections");
    for _ in 0..200 {
        assert_refused_busy(UnixStream::connect(&fx.socket).unwrap());
    }
    // Closing one makes room for one.
    drop(held.pop());
    wait_until("a connection is served again", || served(&fx));
    // The held ones were never disturbed.
    assert_eq!(held[0].run("still", "echo here")["stdout"], "here\n");
}

#[test]
fn a_flood_of_half_lines_and_connections_leaves_memory_bounded() {
    let fx = Fixture::new(&policy(""));
    let d = fx.start(&[]);
    // Warm up the paths a normal call takes, so the baseline includes them.
    assert_eq!(fx.connect().run("warm", "echo warm")["ok"], true);
    let baseline = rss_kib(d.pid());

    // The default cap is 64 connections of at most one line (1 MiB) each:
    // the daemon may hold 64 MiB of half-lines, never more. Each sends one
    // byte short of the limit and no newline, then the rest of the flood
    // finds no room.
    let almost = vec![b'x'; (1 << 20) - 1];
    let mut held = Vec::new();
    for _ in 0..1000 {
        if held.len() == 64 {
            break;
        }
        let mut s = UnixStream::connect(&fx.socket).unwrap();
        s.set_write_timeout(Some(PATIENCE)).unwrap();
        // Refused while the warm-up connection still counted: try again.
        if s.write_all(&almost).is_ok() {
            held.push(s);
        }
    }
    assert_eq!(
        held.len(),
        64,
        "the daemon never had room for 64 connections"
    );
    // Connections beyond the cap are refused however much they send.
    for _ in 0..200 {
        let mut s = UnixStream::connect(&fx.socket).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(&almost);
        assert_refused_busy(s);
    }
    // Everything sent was read: the daemon holds it now.
    std::thread::sleep(Duration::from_millis(500));
    let peak = rss_kib(d.pid());
    let grew = peak.saturating_sub(baseline);
    eprintln!("RSS: baseline {baseline} KiB, peak {peak} KiB (+{grew} KiB)");
    // 64 MiB of half-lines plus the read buffers and allocator slack.
    assert!(grew < 96 * 1024, "the flood grew the daemon by {grew} KiB");

    drop(held);
    wait_until("the daemon serves again", || served(&fx));
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(d.pid());
    eprintln!("RSS after the flood closed: {after} KiB");
    assert!(
        after < baseline + 16 * 1024,
        "{after} KiB held after the flood closed (baseline {baseline} KiB)"
    );
}
