//! Load client for the daemon benchmarks (`scripts/bench-spawn.sh`,
//! `scripts/bench-daemon.sh`).
//!
//! Written in Rust with blocking std sockets so that the client costs as
//! little CPU as possible: on a 2-core machine a heavy client would steal
//! the cores the daemon is being measured on.
//!
//! ```text
//! bench_client once   --socket S [--command C]
//! bench_client seq    --socket S [--command C] [--requests N] [--bare PROGRAM] [--out F]
//! bench_client load   --socket S [--command C] [--requests N] [--clients K] [--out F]
//! bench_client spawn  --bare PROGRAM [--requests N] [--clients K] [--out F]
//! ```
//!
//! `seq` sends N requests one after another over one connection and, with
//! `--bare`, spawns PROGRAM directly between them, so the daemon's per-run
//! cost and its baseline come from the same, interleaved run. `load` runs K
//! connections at once until N requests have been answered in total; `spawn`
//! is its baseline: K threads spawning PROGRAM directly, N times in total.
//! Results are one JSON object on stdout (and in `--out`).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::{Value, json};

#[derive(Debug, thiserror::Error)]
enum ClientError {
    #[error("usage: {0}")]
    Usage(String),
    #[error("socket {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("the daemon closed the connection before answering")]
    Closed,
    #[error("answer is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("a load thread panicked")]
    Thread,
}

struct Options {
    mode: String,
    socket: PathBuf,
    command: String,
    requests: u64,
    clients: u64,
    bare: Option<String>,
    out: Option<PathBuf>,
}

fn parse_args() -> Result<Options, ClientError> {
    let mut args = std::env::args().skip(1);
    let mode = args
        .next()
        .ok_or_else(|| ClientError::Usage("bench_client once|seq|load --socket S ...".into()))?;
    let mut o = Options {
        mode,
        socket: PathBuf::new(),
        command: "/bin/true".to_string(),
        requests: 1000,
        clients: 1,
        bare: None,
        out: None,
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| ClientError::Usage(format!("{flag} needs a value")))?;
        let number = |v: &str| {
            v.parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| ClientError::Usage(format!("{flag} takes a positive integer")))
        };
        match flag.as_str() {
            "--socket" => o.socket = PathBuf::from(value),
            "--command" => o.command = value,
            "--requests" => o.requests = number(&value)?,
            "--clients" => o.clients = number(&value)?,
            "--bare" => o.bare = Some(value),
            "--out" => o.out = Some(PathBuf::from(value)),
            other => return Err(ClientError::Usage(format!("unknown flag {other}"))),
        }
    }
    if o.socket.as_os_str().is_empty() && o.mode != "spawn" {
        return Err(ClientError::Usage("--socket is required".into()));
    }
    Ok(o)
}

/// One connection; requests are answered in order on it because this
/// client never has more than one outstanding.
struct Conn {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    line: String,
    request: Vec<u8>,
}

/// What one answer said, kept small: the bench only needs to know whether
/// the sandboxed run succeeded, and why not when it did not.
struct Answer {
    ok: bool,
    error: Option<String>,
}

impl Conn {
    fn open(path: &PathBuf) -> Result<Conn, ClientError> {
        let writer = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.clone(),
            source,
        })?;
        let reader = BufReader::new(writer.try_clone()?);
        Ok(Conn {
            writer,
            reader,
            line: String::with_capacity(4096),
            request: Vec::with_capacity(256),
        })
    }

    fn call(&mut self, id: u64, command: &str) -> Result<Answer, ClientError> {
        self.request.clear();
        serde_json::to_writer(
            &mut self.request,
            &json!({"id": id, "tool": "run_shell", "args": {"command": command}}),
        )?;
        self.request.push(b'\n');
        self.writer.write_all(&self.request)?;
        self.line.clear();
        if self.reader.read_line(&mut self.line)? == 0 {
            return Err(ClientError::Closed);
        }
        let v: Value = serde_json::from_str(&self.line)?;
        let ok = v.get("ok").and_then(Value::as_bool) == Some(true);
        let error = (!ok).then(|| {
            format!(
                "{}: {}",
                v.get("error_type").and_then(Value::as_str).unwrap_or("?"),
                v.get("message").and_then(Value::as_str).unwrap_or("")
            )
        });
        Ok(Answer { ok, error })
    }
}

/// Nearest-rank percentile over sorted nanoseconds, in milliseconds.
fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let idx = rank.clamp(1, sorted.len()) - 1;
    sorted[idx] as f64 / 1e6
}

fn summary(mut ns: Vec<u64>) -> Value {
    ns.sort_unstable();
    let mean = if ns.is_empty() {
        f64::NAN
    } else {
        ns.iter().map(|&n| n as f64).sum::<f64>() / ns.len() as f64 / 1e6
    };
    json!({
        "n": ns.len(),
        "median_ms": pct(&ns, 50.0),
        "p90_ms": pct(&ns, 90.0),
        "p99_ms": pct(&ns, 99.0),
        "min_ms": pct(&ns, 0.0),
        "max_ms": pct(&ns, 100.0),
        "mean_ms": mean,
    })
}

fn elapsed_ns(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn once(o: &Options) -> Result<Value, ClientError> {
    let mut conn = Conn::open(&o.socket)?;
    let a = conn.call(1, &o.command)?;
    Ok(json!({"ok": a.ok, "error": a.error}))
}

fn spawn_bare(program: &str) -> Result<bool, ClientError> {
    let status = Command::new(program)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    Ok(status.success())
}

fn seq(o: &Options) -> Result<Value, ClientError> {
    let mut conn = Conn::open(&o.socket)?;
    // Warm-up: the first calls pay for lazily built daemon state.
    for i in 0..10 {
        conn.call(i, &o.command)?;
    }
    let n = usize::try_from(o.requests).unwrap_or(usize::MAX);
    let mut daemon = Vec::with_capacity(n);
    let mut bare = Vec::with_capacity(n);
    let mut failures = 0u64;
    let mut first_error = None;
    for i in 0..o.requests {
        let t = Instant::now();
        let a = conn.call(1000 + i, &o.command)?;
        daemon.push(elapsed_ns(t));
        if !a.ok {
            failures += 1;
            first_error = first_error.or(a.error);
        }
        if let Some(program) = &o.bare {
            let t = Instant::now();
            let ok = spawn_bare(program)?;
            bare.push(elapsed_ns(t));
            if !ok {
                failures += 1;
            }
        }
    }
    let mut out = json!({
        "mode": "seq",
        "command": o.command,
        "requests": o.requests,
        "failures": failures,
        "first_error": first_error,
        "daemon": summary(daemon.clone()),
    });
    if o.bare.is_some() {
        // Per-pair differences: each daemon call against the bare spawn
        // right after it, so slow phases of a noisy machine cancel out.
        let mut d_sorted = daemon.clone();
        d_sorted.sort_unstable();
        let mut b_sorted = bare.clone();
        b_sorted.sort_unstable();
        let overhead = pct(&d_sorted, 50.0) - pct(&b_sorted, 50.0);
        let mut diffs: Vec<i64> = daemon
            .iter()
            .zip(&bare)
            .map(|(&d, &b)| i64::try_from(d).unwrap_or(i64::MAX) - i64::try_from(b).unwrap_or(0))
            .collect();
        diffs.sort_unstable();
        let median_diff = diffs
            .get(diffs.len() / 2)
            .map_or(f64::NAN, |&d| d as f64 / 1e6);
        out["bare"] = summary(bare);
        out["overhead_median_ms"] = json!(overhead);
        out["overhead_paired_median_ms"] = json!(median_diff);
    }
    Ok(out)
}

fn load(o: &Options) -> Result<Value, ClientError> {
    let next = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    // Every connection is open before the clock starts, so connection setup
    // is not counted as throughput.
    let mut conns = Vec::new();
    for _ in 0..o.clients {
        conns.push(Conn::open(&o.socket)?);
    }
    for (i, c) in conns.iter_mut().enumerate() {
        c.call(i as u64, &o.command)?;
    }
    let start = Instant::now();
    let mut handles = Vec::new();
    for mut conn in conns {
        let next = Arc::clone(&next);
        let failures = Arc::clone(&failures);
        let total = o.requests;
        let command = o.command.clone();
        handles.push(std::thread::spawn(
            move || -> Result<(Vec<u64>, Option<String>), ClientError> {
                let mut lat = Vec::new();
                let mut first_error = None;
                loop {
                    let id = next.fetch_add(1, Ordering::Relaxed);
                    if id >= total {
                        return Ok((lat, first_error));
                    }
                    let t = Instant::now();
                    let a = conn.call(id, &command)?;
                    lat.push(elapsed_ns(t));
                    if !a.ok {
                        failures.fetch_add(1, Ordering::Relaxed);
                        first_error = first_error.or(a.error);
                    }
                }
            },
        ));
    }
    let mut all = Vec::new();
    let mut first_error = None;
    for h in handles {
        let (lat, err) = h.join().map_err(|_| ClientError::Thread)??;
        all.extend(lat);
        first_error = first_error.or(err);
    }
    let wall = start.elapsed();
    let done = all.len() as f64;
    Ok(json!({
        "mode": "load",
        "command": o.command,
        "clients": o.clients,
        "requests": all.len(),
        "failures": failures.load(Ordering::Relaxed),
        "first_error": first_error,
        "wall_s": wall.as_secs_f64(),
        "runs_per_s": done / wall.as_secs_f64().max(f64::MIN_POSITIVE),
        "latency": summary(all),
    }))
}

/// The machine's own capacity for the same work without the daemon: K
/// threads spawning the program directly, N times in total.
fn spawn_load(o: &Options) -> Result<Value, ClientError> {
    let program = o
        .bare
        .clone()
        .ok_or_else(|| ClientError::Usage("spawn needs --bare PROGRAM".into()))?;
    let next = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..o.clients {
        let next = Arc::clone(&next);
        let failures = Arc::clone(&failures);
        let total = o.requests;
        let program = program.clone();
        handles.push(std::thread::spawn(
            move || -> Result<Vec<u64>, ClientError> {
                let mut lat = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let t = Instant::now();
                    if !spawn_bare(&program)? {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                    lat.push(elapsed_ns(t));
                }
                Ok(lat)
            },
        ));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.join().map_err(|_| ClientError::Thread)??);
    }
    let wall = start.elapsed();
    let done = all.len() as f64;
    Ok(json!({
        "mode": "spawn",
        "command": program,
        "clients": o.clients,
        "requests": all.len(),
        "failures": failures.load(Ordering::Relaxed),
        "first_error": Value::Null,
        "wall_s": wall.as_secs_f64(),
        "runs_per_s": done / wall.as_secs_f64().max(f64::MIN_POSITIVE),
        "latency": summary(all),
    }))
}

fn run() -> Result<bool, ClientError> {
    let o = parse_args()?;
    let result = match o.mode.as_str() {
        "once" => once(&o)?,
        "seq" => seq(&o)?,
        "load" => load(&o)?,
        "spawn" => spawn_load(&o)?,
        other => return Err(ClientError::Usage(format!("unknown mode {other}"))),
    };
    let text = result.to_string();
    if let Some(path) = &o.out {
        std::fs::write(path, format!("{text}\n"))?;
    }
    if o.mode != "once" {
        println!("{text}");
    }
    let ok = match o.mode.as_str() {
        "once" => result.get("ok").and_then(Value::as_bool) == Some(true),
        _ => result.get("failures").and_then(Value::as_u64) == Some(0),
    };
    if !ok {
        eprintln!("bench_client: some calls failed: {result}");
    }
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("bench_client: {e}");
            ExitCode::from(2)
        }
    }
}
