//! Durable state: idempotency keys with their stored results, and
//! side-effect budgets.
//!
//! Everything is kept per [`SessionId`]: the caller's uid, established by
//! the transport, and the client's session label. A key belongs to one
//! session of one uid, so no other uid (and no other label) can replay it
//! and read the stored result. Budgets bind twice: per session, and per
//! uid across all of its sessions ([`Budgets`]), so a client cannot dodge
//! its budget by inventing new labels.
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
use crate::request::SessionId;
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

/// The limits a mutating call is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budgets {
    /// What one session (one label of one uid) may spend.
    pub session: BudgetPolicy,
    /// What all the sessions of one uid may spend together.
    pub uid: BudgetPolicy,
}

impl Budgets {
    /// `session` per session, and `sessions` times that per uid.
    pub fn per_uid_sessions(session: &BudgetPolicy, sessions: u64) -> Budgets {
        Budgets {
            uid: BudgetPolicy {
                max_mutating_runs: session.max_mutating_runs.saturating_mul(sessions),
                max_wall_ms: session.max_wall_ms.saturating_mul(sessions),
            },
            session: session.clone(),
        }
    }
}

/// Idempotency keys and budgets, as the service uses them.
///
/// Only mutating calls spend anything: for those the service calls
/// [`begin`](StateStore::begin) when the request carries a key, then
/// [`budget_check`](StateStore::budget_check), runs the command, then
/// [`budget_charge`](StateStore::budget_charge) and
/// [`finish`](StateStore::finish). Every method is scoped by the call's
/// [`SessionId`]: an implementation must never answer one session with
/// what another stored. Implementations are shared by concurrent calls, so
/// every method takes `&self`.
pub trait StateStore: Send + Sync {
    /// Looks up `key` in `session`, reserving it for this call when it was
    /// never seen there. A reservation must end with
    /// [`finish`](StateStore::finish).
    fn begin(&self, session: &SessionId, key: &str, args_hash: &str) -> Result<Begin, StoreError>;
    /// Stores the result of a call that `begin` answered `Fresh`, so a
    /// retry with the same key in the same session gets it back as a
    /// duplicate.
    fn finish(
        &self,
        session: &SessionId,
        key: &str,
        args_hash: &str,
        result: &ToolResult,
    ) -> Result<(), StoreError>;
    /// `Some(reason)` when `session`, or its uid across all its sessions,
    /// has spent its budget.
    fn budget_check(
        &self,
        session: &SessionId,
        budgets: &Budgets,
    ) -> Result<Option<String>, StoreError>;
    /// Adds one run's cost to `session` and to its uid.
    fn budget_charge(
        &self,
        session: &SessionId,
        mutating: bool,
        wall_ms: u64,
    ) -> Result<(), StoreError>;
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

/// Keys and budgets by session (uid and label) and by uid. `user_version`
/// 2 marks this layout; earlier files had `calls` and `budgets` keyed by
/// the client's label alone, which `migrate` folds in.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency (
    uid          INTEGER NOT NULL,
    session      TEXT NOT NULL,
    key          TEXT NOT NULL,
    args_hash    TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('running', 'done')),
    owner_pid    INTEGER NOT NULL,
    owner_start  INTEGER NOT NULL,
    result       TEXT,
    created_ms   INTEGER NOT NULL,
    finished_ms  INTEGER,
    PRIMARY KEY (uid, session, key)
);
CREATE TABLE IF NOT EXISTS session_budgets (
    uid           INTEGER NOT NULL,
    session       TEXT NOT NULL,
    mutating_runs INTEGER NOT NULL DEFAULT 0,
    wall_ms       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (uid, session)
);
CREATE TABLE IF NOT EXISTS uid_budgets (
    uid           INTEGER PRIMARY KEY,
    mutating_runs INTEGER NOT NULL DEFAULT 0,
    wall_ms       INTEGER NOT NULL DEFAULT 0
);
";

const SCHEMA_VERSION: i64 = 2;

impl SqliteStore {
    /// Opens (creating when needed) `state.db` in `state_dir`.
    pub fn open(state_dir: &Path) -> Result<SqliteStore, StoreError> {
        let dir_err = |source| StoreError::Dir {
            path: state_dir.to_path_buf(),
            source,
        };
        // Private to the supervisor's uid: the directory holds pending
        // approvals and the amendments a human saved, which no other uid
        // may read or change.
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(state_dir)
                .map_err(dir_err)?;
            // A directory made earlier (by the trace writer, or by hand)
            // is made private too, when it is ours to change.
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            let meta = std::fs::metadata(state_dir).map_err(dir_err)?;
            if meta.mode() & 0o077 != 0 && meta.uid() == nix::unistd::geteuid().as_raw() {
                std::fs::set_permissions(state_dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(dir_err)?;
            }
        }
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
        if !path.exists() {
            use std::os::unix::fs::OpenOptionsExt;
            // Created 0600 before SQLite sees it: its journal files take
            // the database's mode.
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
                .map_err(dir_err)?;
        }
        let mut conn = Connection::open(&path).map_err(open_err)?;
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
        conn.execute_batch(approvals::SCHEMA).map_err(open_err)?;
        conn.execute_batch(ledger::SCHEMA).map_err(open_err)?;
        migrate(&mut conn).map_err(open_err)?;
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
    fn begin(&self, session: &SessionId, key: &str, args_hash: &str) -> Result<Begin, StoreError> {
        let (uid, label) = (session.uid(), session.label_or_default());
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row: Option<(String, String, i64, i64, Option<String>)> = tx
            .query_row(
                "SELECT args_hash, state, owner_pid, owner_start, result FROM idempotency
                 WHERE uid = ?1 AND session = ?2 AND key = ?3",
                params![uid, label, key],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .optional()?;
        let outcome = match row {
            None => {
                tx.execute(
                    "INSERT INTO idempotency
                         (uid, session, key, args_hash, state, owner_pid, owner_start, created_ms)
                     VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7)",
                    params![
                        uid,
                        label,
                        key,
                        args_hash,
                        self.owner.pid,
                        self.owner.start,
                        now_ms()
                    ],
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
                    store_result(&tx, &Row::of(session, key), &r)?;
                    Begin::Duplicate(mark_duplicate(r))
                }
            }
        };
        tx.commit()?;
        Ok(outcome)
    }

    fn finish(
        &self,
        session: &SessionId,
        key: &str,
        args_hash: &str,
        result: &ToolResult,
    ) -> Result<(), StoreError> {
        let mut stored = result.clone();
        // The request id belongs to one connection's exchange, not to the
        // call: a later duplicate answers with its own id.
        stored.id = None;
        stored.duplicate = false;
        let json = serde_json::to_string(&stored).map_err(StoreError::Encode)?;
        let conn = self.conn();
        let n = conn.execute(
            "UPDATE idempotency SET state = 'done', result = ?5, finished_ms = ?6
             WHERE uid = ?1 AND session = ?2 AND key = ?3 AND args_hash = ?4
               AND state = 'running'",
            params![
                session.uid(),
                session.label_or_default(),
                key,
                args_hash,
                json,
                now_ms()
            ],
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
        session: &SessionId,
        budgets: &Budgets,
    ) -> Result<Option<String>, StoreError> {
        let (uid, label) = (session.uid(), session.label_or_default());
        let conn = self.conn();
        let spent = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> Result<(u64, u64), StoreError> {
            let used: Option<(i64, i64)> = conn
                .query_row(sql, p, |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            Ok(used.map_or((0, 0), |(r, w)| (to_u64(r), to_u64(w))))
        };
        let (runs, wall) = spent(
            "SELECT mutating_runs, wall_ms FROM session_budgets WHERE uid = ?1 AND session = ?2",
            &[&uid, &label],
        )?;
        let b = &budgets.session;
        if runs >= b.max_mutating_runs {
            return Ok(Some(format!(
                "session {label} has used {runs} of its {} mutating runs",
                b.max_mutating_runs
            )));
        }
        if wall >= b.max_wall_ms {
            return Ok(Some(format!(
                "session {label} has used {wall} ms of its {} ms of run time",
                b.max_wall_ms
            )));
        }
        let (runs, wall) = spent(
            "SELECT mutating_runs, wall_ms FROM uid_budgets WHERE uid = ?1",
            &[&uid],
        )?;
        let b = &budgets.uid;
        if runs >= b.max_mutating_runs {
            return Ok(Some(format!(
                "uid {uid} has used {runs} of the {} mutating runs all its sessions may spend together",
                b.max_mutating_runs
            )));
        }
        if wall >= b.max_wall_ms {
            return Ok(Some(format!(
                "uid {uid} has used {wall} ms of the {} ms of run time all its sessions may spend together",
                b.max_wall_ms
            )));
        }
        Ok(None)
    }

    fn budget_charge(
        &self,
        session: &SessionId,
        mutating: bool,
        wall_ms: u64,
    ) -> Result<(), StoreError> {
        let wall = i64::try_from(wall_ms).unwrap_or(i64::MAX);
        let (uid, label) = (session.uid(), session.label_or_default());
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO session_budgets (uid, session, mutating_runs, wall_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(uid, session) DO UPDATE SET
                 mutating_runs = mutating_runs + excluded.mutating_runs,
                 wall_ms = min(wall_ms + excluded.wall_ms, 9223372036854775807)",
            params![uid, label, i64::from(mutating), wall],
        )?;
        tx.execute(
            "INSERT INTO uid_budgets (uid, mutating_runs, wall_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(uid) DO UPDATE SET
                 mutating_runs = mutating_runs + excluded.mutating_runs,
                 wall_ms = min(wall_ms + excluded.wall_ms, 9223372036854775807)",
            params![uid, i64::from(mutating), wall],
        )?;
        tx.commit()?;
        Ok(())
    }
}

/// One row of `idempotency`.
struct Row<'a> {
    uid: u32,
    session: &'a str,
    key: &'a str,
}

impl<'a> Row<'a> {
    fn of(session: &'a SessionId, key: &'a str) -> Row<'a> {
        Row {
            uid: session.uid(),
            session: session.label_or_default(),
            key,
        }
    }
}

/// Brings a state file of an earlier version to this layout, once. Keys
/// and budgets were kept by the client's label alone, with no uid: they
/// are given to the uid of the process that opens the file first (the
/// daemon, normally), keys under the session `default`, where a client
/// that never set a label (the common case) keeps finding them.
fn migrate(conn: &mut Connection) -> Result<(), rusqlite::Error> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    let uid = nix::unistd::geteuid().as_raw();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let has = |name: &str| -> Result<bool, rusqlite::Error> {
        tx.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            params![name],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
    };
    if has("calls")? {
        tx.execute(
            "INSERT OR IGNORE INTO idempotency
                 (uid, session, key, args_hash, state, owner_pid, owner_start, result,
                  created_ms, finished_ms)
             SELECT ?1, 'default', key, args_hash, state, owner_pid, owner_start, result,
                    created_ms, finished_ms
             FROM calls",
            params![uid],
        )?;
        tx.execute("DROP TABLE calls", [])?;
    }
    if has("budgets")? {
        tx.execute(
            "INSERT OR IGNORE INTO session_budgets (uid, session, mutating_runs, wall_ms)
             SELECT ?1, session, mutating_runs, wall_ms FROM budgets",
            params![uid],
        )?;
        tx.execute(
            "INSERT OR IGNORE INTO uid_budgets (uid, mutating_runs, wall_ms)
             SELECT ?1, sum(mutating_runs), min(sum(wall_ms), 9223372036854775807) FROM budgets
             HAVING count(*) > 0",
            params![uid],
        )?;
        tx.execute("DROP TABLE budgets", [])?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()
}

impl SqliteStore {
    /// Settles reservations left by dead processes, so that a restarted
    /// daemon answers them at once instead of reporting them in flight.
    fn finalize_interrupted(&self) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let stale: Vec<(u32, String, String)> = {
            let mut stmt = tx.prepare(
                "SELECT uid, session, key, owner_pid, owner_start FROM idempotency
                 WHERE state = 'running'",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, u32>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })?;
            let mut keys = Vec::new();
            for row in rows {
                let (uid, session, key, pid, start) = row?;
                if !Owner::alive(pid, start) {
                    keys.push((uid, session, key));
                }
            }
            keys
        };
        for (uid, session, key) in &stale {
            tracing::warn!(uid, session = %session, idempotency_key = %key, "call interrupted by a previous daemon's death; answered as cancelled");
            let row = Row {
                uid: *uid,
                session,
                key,
            };
            store_result(&tx, &row, &interrupted_result(key))?;
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
    row: &Row<'_>,
    r: &ToolResult,
) -> Result<(), StoreError> {
    let json = serde_json::to_string(r).map_err(StoreError::Encode)?;
    tx.execute(
        "UPDATE idempotency SET state = 'done', result = ?4, finished_ms = ?5
         WHERE uid = ?1 AND session = ?2 AND key = ?3",
        params![row.uid, row.session, row.key, json, now_ms()],
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

mod approvals;
mod ledger;

pub use ledger::{LedgerRow, LedgerStore};

#[cfg(test)]
mod tests;
