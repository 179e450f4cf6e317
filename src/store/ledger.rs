//! Argument provenance ledgers in `state.db`: one row per entry, keyed by
//! session, so a restarted daemon picks each session's ledger up where it
//! was. Names only, never file contents.

use rusqlite::{TransactionBehavior, params};

use super::{SqliteStore, StoreError};
use crate::request::SessionId;

/// A ledger entry as it is stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LedgerRow {
    /// `p:PATH` a path, `d:DIR` a listed directory, `h:HASH7` a commit,
    /// `r:NAME` a branch or tag.
    pub key: String,
    /// The call whose result showed it.
    pub source: String,
    /// Recency: larger is more recent.
    pub tick: u64,
}

/// Where argument provenance ledgers are kept between processes.
pub trait LedgerStore: Send + Sync {
    /// Every entry of `session`'s ledger.
    fn ledger_load(&self, session: &SessionId) -> Result<Vec<LedgerRow>, StoreError>;
    /// Applies one call's changes to `session`'s ledger.
    fn ledger_save(
        &self,
        session: &SessionId,
        upsert: &[LedgerRow],
        remove: &[String],
    ) -> Result<(), StoreError>;
}

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS provenance_ledger (
    uid      INTEGER NOT NULL,
    session  TEXT NOT NULL,
    key      TEXT NOT NULL,
    source   TEXT NOT NULL,
    tick     INTEGER NOT NULL,
    PRIMARY KEY (uid, session, key)
);
";

impl LedgerStore for SqliteStore {
    fn ledger_load(&self, session: &SessionId) -> Result<Vec<LedgerRow>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT key, source, tick FROM provenance_ledger
             WHERE uid = ?1 AND session = ?2 ORDER BY tick",
        )?;
        let rows = stmt.query_map(params![session.uid(), session.label_or_default()], |r| {
            Ok(LedgerRow {
                key: r.get(0)?,
                source: r.get(1)?,
                tick: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
            })
        })?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row?);
        }
        Ok(out)
    }

    fn ledger_save(
        &self,
        session: &SessionId,
        upsert: &[LedgerRow],
        remove: &[String],
    ) -> Result<(), StoreError> {
        let (uid, label) = (session.uid(), session.label_or_default());
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut put = tx.prepare_cached(
                "INSERT INTO provenance_ledger (uid, session, key, source, tick)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(uid, session, key) DO UPDATE SET tick = excluded.tick",
            )?;
            for r in upsert {
                let tick = i64::try_from(r.tick).unwrap_or(i64::MAX);
                put.execute(params![uid, label, r.key, r.source, tick])?;
            }
            let mut del = tx.prepare_cached(
                "DELETE FROM provenance_ledger WHERE uid = ?1 AND session = ?2 AND key = ?3",
            )?;
            for k in remove {
                del.execute(params![uid, label, k])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}
