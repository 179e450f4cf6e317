//! Durable state: idempotency keys with their stored results, and
//! per-session side-effect budgets.
//!
//! [`StateStore`] is what the service asks of any store; [`SqliteStore`] is
//! the one the CLI (`--state`) and the daemon use. One SQLite file (`state.db`, WAL) in the state directory. Every operation
//! is a short transaction on one connection behind a mutex: calls take
//! milliseconds to seconds, so the store is never the bottleneck, and a
//! single writer keeps the reservation logic (`begin`) race-free.
//!
//! A key reserved by `begin` and never finished is an interrupted call: the
//! process that reserved it died (crash, `kill -9`) while the command ran.
//! Such a key is **not re-runnable**: the command may have had part of its
//! side effects, so running it again could apply them twice. The first time
//! the key is seen again it is finalized with a `CANCELLED` result and that
//! result is answered as a duplicate from then on; the client must check
//! the state of its work and use a new key. A reservation belongs to the
//! process (pid and start time) that made it, so a second process sharing
//! the state directory (a CLI run next to the daemon) never mistakes a live
//! call for an interrupted one.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::policy::BudgetPolicy;
use crate::result::{ErrorType, ToolResult};

/// What [`StateStore::begin`] found for an idempotency key.
// `Duplicate` is large, but `Begin` is built once per call and moved at once;
// boxing would only add an allocation to the duplicate path.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Begin {
    /// Never seen: the key is now reserved for this call, which must end
    /// with `finish`.
    Fresh,
    /// Already finished with the same arguments: the stored result, marked
    /// `duplicate`. Nothing must run.
    Duplicate(ToolResult),
    /// The key was used with different arguments.
    KeyReuse { stored_args_hash: String },
    /// Reserved by a call that is still running.
    InFlight,
}

/// Why the state store could not answer. The service turns it into an
/// `INTERNAL_ERROR` result; the command does not run.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state directory {path} is not usable: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("state database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("state database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("stored result for key {key} is unreadable: {source}")]
    Corrupt {
        key: String,
        source: serde_json::Error,
    },
    #[error("could not encode the result: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("finish for key {key} without a matching begin")]
    NotReserved { key: String },
    /// A failure of another [`StateStore`] implementation.
    #[error("state store: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Idempotency keys and session budgets, as the service uses them.
///
/// Only mutating calls spend anything: for those the service calls
/// [`begin`](StateStore::begin) when the request carries a key, then
/// [`budget_check`](StateStore::budget_check), runs the command, then
/// [`budget_charge`](StateStore::budget_charge) and
/// [`finish`](StateStore::finish). Implementations are shared by
/// concurrent calls, so every method takes `&self`.
pub trait StateStore: Send + Sync {
    /// Looks up `key`, reserving it for this call when it was never seen.
    /// A reservation must end with [`finish`](StateStore::finish).
    fn begin(&self, key: &str, args_hash: &str) -> Result<Begin, StoreError>;
    /// Stores the result of a call that `begin` answered `Fresh`, so a
    /// retry with the same key gets it back as a duplicate.
    fn finish(&self, key: &str, args_hash: &str, result: &ToolResult) -> Result<(), StoreError>;
    /// `Some(reason)` when `session` has spent its budget.
    fn budget_check(
        &self,
        session: &str,
        budget: &BudgetPolicy,
    ) -> Result<Option<String>, StoreError>;
    /// Adds one run's cost to `session`.
    fn budget_charge(&self, session: &str, mutating: bool, wall_ms: u64) -> Result<(), StoreError>;
}

/// The SQLite [`StateStore`]: `state.db` in a state directory, shared
/// safely by every process that opens the same directory.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    owner: Owner,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Identifies a process across pid reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    pid: i64,
    start: i64,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS calls (
    key          TEXT PRIMARY KEY,
    args_hash    TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('running', 'done')),
    owner_pid    INTEGER NOT NULL,
    owner_start  INTEGER NOT NULL,
    result       TEXT,
    created_ms   INTEGER NOT NULL,
    finished_ms  INTEGER
);
CREATE TABLE IF NOT EXISTS budgets (
    session       TEXT PRIMARY KEY,
    mutating_runs INTEGER NOT NULL DEFAULT 0,
    wall_ms       INTEGER NOT NULL DEFAULT 0
);
";

impl SqliteStore {
    /// Opens (creating when needed) `state.db` in `state_dir`.
    pub fn open(state_dir: &Path) -> Result<SqliteStore, StoreError> {
        let dir_err = |source| StoreError::Dir {
            path: state_dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(state_dir).map_err(dir_err)?;
        // SQLite opens lazily and would report an unwritable directory only on
        // the first write, as a vague "unable to open database"; probing
        // first gives the operator the real cause at start.
        let probe = state_dir.join(format!(".probe-{}", std::process::id()));
        std::fs::write(&probe, b"").map_err(dir_err)?;
        let _ = std::fs::remove_file(&probe);

        let path = state_dir.join("state.db");
        let open_err = |source| StoreError::Open {
            path: path.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        // WAL with NORMAL is durable across process crashes (the case that
        // matters for idempotency); only a power loss may lose the last
        // commits.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.execute_batch(SCHEMA).map_err(open_err)?;
        let store = SqliteStore {
            conn: Mutex::new(conn),
            owner: Owner::current(),
            path,
        };
        store.finalize_interrupted()?;
        Ok(store)
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent
        // (transactions roll back on drop), so a poisoned lock is usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl StateStore for SqliteStore {
    fn begin(&self, key: &str, args_hash: &str) -> Result<Begin, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row: Option<(String, String, i64, i64, Option<String>)> = tx
            .query_row(
                "SELECT args_hash, state, owner_pid, owner_start, result FROM calls WHERE key = ?1",
                params![key],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .optional()?;
        let outcome = match row {
            None => {
                tx.execute(
                    "INSERT INTO calls (key, args_hash, state, owner_pid, owner_start, created_ms)
                     VALUES (?1, ?2, 'running', ?3, ?4, ?5)",
                    params![key, args_hash, self.owner.pid, self.owner.start, now_ms()],
                )?;
                Begin::Fresh
            }
            Some((stored_hash, _, _, _, _)) if stored_hash != args_hash => Begin::KeyReuse {
                stored_args_hash: stored_hash,
            },
            Some((_, state, pid, start, result)) => {
                if state == "done" {
                    Begin::Duplicate(decode(key, result.as_deref())?)
                } else if Owner::alive(pid, start) {
                    Begin::InFlight
                } else {
                    let r = interrupted_result(key);
                    store_result(&tx, key, &r)?;
                    Begin::Duplicate(mark_duplicate(r))
                }
            }
        };
        tx.commit()?;
        Ok(outcome)
    }

    fn finish(&self, key: &str, args_hash: &str, result: &ToolResult) -> Result<(), StoreError> {
        let mut stored = result.clone();
        // The request id belongs to one connection's exchange, not to the
        // call: a later duplicate answers with its own id.
        stored.id = None;
        stored.duplicate = false;
        let json = serde_json::to_string(&stored).map_err(StoreError::Encode)?;
        let conn = self.conn();
        let n = conn.execute(
            "UPDATE calls SET state = 'done', result = ?3, finished_ms = ?4
             WHERE key = ?1 AND args_hash = ?2 AND state = 'running'",
            params![key, args_hash, json, now_ms()],
        )?;
        if n == 0 {
            return Err(StoreError::NotReserved {
                key: key.to_string(),
            });
        }
        Ok(())
    }

    fn budget_check(
        &self,
        session: &str,
        budget: &BudgetPolicy,
    ) -> Result<Option<String>, StoreError> {
        let conn = self.conn();
        let used: Option<(i64, i64)> = conn
            .query_row(
                "SELECT mutating_runs, wall_ms FROM budgets WHERE session = ?1",
                params![session],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let (runs, wall) = used.map_or((0, 0), |(r, w)| (to_u64(r), to_u64(w)));
        if runs >= budget.max_mutating_runs {
            return Ok(Some(format!(
                "session {session} has used {runs} of its {} mutating runs",
                budget.max_mutating_runs
            )));
        }
        if wall >= budget.max_wall_ms {
            return Ok(Some(format!(
                "session {session} has used {wall} ms of its {} ms of run time",
                budget.max_wall_ms
            )));
        }
        Ok(None)
    }

    fn budget_charge(&self, session: &str, mutating: bool, wall_ms: u64) -> Result<(), StoreError> {
        let wall = i64::try_from(wall_ms).unwrap_or(i64::MAX);
        self.conn().execute(
            "INSERT INTO budgets (session, mutating_runs, wall_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(session) DO UPDATE SET
                 mutating_runs = mutating_runs + excluded.mutating_runs,
                 wall_ms = min(wall_ms + excluded.wall_ms, 9223372036854775807)",
            params![session, i64::from(mutating), wall],
        )?;
        Ok(())
    }
}

impl SqliteStore {
    /// Settles reservations left by dead processes, so that a restarted
    /// daemon answers them at once instead of reporting them in flight.
    fn finalize_interrupted(&self) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let stale: Vec<String> = {
            let mut stmt = tx
                .prepare("SELECT key, owner_pid, owner_start FROM calls WHERE state = 'running'")?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })?;
            let mut keys = Vec::new();
            for row in rows {
                let (key, pid, start) = row?;
                if !Owner::alive(pid, start) {
                    keys.push(key);
                }
            }
            keys
        };
        for key in &stale {
            tracing::warn!(idempotency_key = %key, "call interrupted by a previous daemon's death; answered as cancelled");
            store_result(&tx, key, &interrupted_result(key))?;
        }
        tx.commit()?;
        Ok(())
    }
}

fn interrupted_result(key: &str) -> ToolResult {
    ToolResult::refusal(
        format!("interrupted-{key}"),
        ErrorType::Cancelled,
        "The supervisor stopped while this call was running, so it may have partly run. \
         Check the state of the work, then send the command again with a new idempotency_key.",
    )
}

fn store_result(
    tx: &rusqlite::Transaction<'_>,
    key: &str,
    r: &ToolResult,
) -> Result<(), StoreError> {
    let json = serde_json::to_string(r).map_err(StoreError::Encode)?;
    tx.execute(
        "UPDATE calls SET state = 'done', result = ?2, finished_ms = ?3 WHERE key = ?1",
        params![key, json, now_ms()],
    )?;
    Ok(())
}

fn decode(key: &str, json: Option<&str>) -> Result<ToolResult, StoreError> {
    let json = json.unwrap_or("null");
    let r: ToolResult = serde_json::from_str(json).map_err(|source| StoreError::Corrupt {
        key: key.to_string(),
        source,
    })?;
    Ok(mark_duplicate(r))
}

fn mark_duplicate(mut r: ToolResult) -> ToolResult {
    r.duplicate = true;
    r
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Owner {
    fn current() -> Owner {
        let pid = i64::from(std::process::id());
        Owner {
            pid,
            start: start_time(pid).unwrap_or(0),
        }
    }

    /// Whether the process that made a reservation still runs. The start
    /// time (clock ticks since boot) tells a reused pid apart.
    fn alive(pid: i64, start: i64) -> bool {
        start_time(pid).is_some_and(|s| s == start)
    }
}

/// Field 22 of `/proc/PID/stat`. The command name (field 2) may contain
/// spaces and parentheses, so fields are counted after its last `)`.
fn start_time(pid: i64) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_result(stdout: &str) -> ToolResult {
        let mut r = ToolResult::success("call-1");
        r.exit_code = Some(0);
        r.stdout = stdout.to_string();
        r.id = Some(serde_json::json!(1));
        r
    }

    #[test]
    fn fresh_then_duplicate_then_key_reuse() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        assert_eq!(store.begin("key-0001", "h1").unwrap(), Begin::Fresh);
        assert_eq!(store.begin("key-0001", "h1").unwrap(), Begin::InFlight);
        store.finish("key-0001", "h1", &ok_result("hello")).unwrap();
        let Begin::Duplicate(r) = store.begin("key-0001", "h1").unwrap() else {
            panic!("not duplicate")
        };
        assert!(r.duplicate);
        assert_eq!(r.stdout, "hello");
        assert_eq!(
            r.id, None,
            "the stored id must not leak into another exchange"
        );
        assert_eq!(
            store.begin("key-0001", "h2").unwrap(),
            Begin::KeyReuse {
                stored_args_hash: "h1".into()
            }
        );
    }

    #[test]
    fn results_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SqliteStore::open(dir.path()).unwrap();
            assert_eq!(store.begin("key-0002", "h").unwrap(), Begin::Fresh);
            store.finish("key-0002", "h", &ok_result("kept")).unwrap();
        }
        let store = SqliteStore::open(dir.path()).unwrap();
        let Begin::Duplicate(r) = store.begin("key-0002", "h").unwrap() else {
            panic!("not duplicate")
        };
        assert_eq!(r.stdout, "kept");
    }

    #[test]
    fn reservation_of_a_dead_process_is_answered_as_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        // A reservation whose owner cannot be alive: pid 0 has no /proc entry.
        store
            .conn()
            .execute(
                "INSERT INTO calls (key, args_hash, state, owner_pid, owner_start, created_ms)
                 VALUES ('key-dead', 'h', 'running', 0, 0, 0)",
                [],
            )
            .unwrap();
        drop(store);
        let store = SqliteStore::open(dir.path()).unwrap();
        let Begin::Duplicate(r) = store.begin("key-dead", "h").unwrap() else {
            panic!("not settled")
        };
        assert_eq!(r.error_type, Some(ErrorType::Cancelled));
        assert!(r.duplicate);
        assert!(matches!(
            store.finish("key-dead", "h", &ok_result("late")),
            Err(StoreError::NotReserved { .. })
        ));
    }

    #[test]
    fn a_live_reservation_of_this_process_stays_in_flight_across_handles() {
        let dir = tempfile::tempdir().unwrap();
        let a = SqliteStore::open(dir.path()).unwrap();
        assert_eq!(a.begin("key-live", "h").unwrap(), Begin::Fresh);
        // A second handle (another process in real life) sees a live owner.
        let b = SqliteStore::open(dir.path()).unwrap();
        assert_eq!(b.begin("key-live", "h").unwrap(), Begin::InFlight);
    }

    #[test]
    fn budget_is_spent_by_runs_or_wall_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let budget = BudgetPolicy {
            max_mutating_runs: 2,
            max_wall_ms: 1_000,
        };
        assert_eq!(store.budget_check("s", &budget).unwrap(), None);
        store.budget_charge("s", true, 10).unwrap();
        store.budget_charge("s", false, 10).unwrap();
        assert_eq!(store.budget_check("s", &budget).unwrap(), None);
        store.budget_charge("s", true, 10).unwrap();
        let reason = store.budget_check("s", &budget).unwrap().unwrap();
        assert!(reason.contains("2 of its 2 mutating runs"), "{reason}");
        assert_eq!(store.budget_check("other", &budget).unwrap(), None);
        store.budget_charge("t", false, 1_000).unwrap();
        assert!(
            store
                .budget_check("t", &budget)
                .unwrap()
                .unwrap()
                .contains("ms")
        );
    }

    #[test]
    fn unwritable_state_dir_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"x").unwrap();
        let err = SqliteStore::open(&file.join("state")).unwrap_err();
        assert!(matches!(err, StoreError::Dir { .. }), "{err}");
        assert!(err.to_string().contains("not-a-dir"), "{err}");
    }
}
