//! Approvals in the state database: created when a call needs one, decided
//! by a human, spent by the one call that runs under it. Each step is one
//! immediate transaction, so two calls can never both spend an approval.

use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, StoreError, now_ms, to_u64};
use crate::approvals::{
    ApprovalRecord, ApprovalState, Binding, DecideRefusal, UseOutcome, UseRefusal,
};
use crate::policy::RiskLevel;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approvals (
    id                 TEXT PRIMARY KEY,
    uid                INTEGER NOT NULL,
    session            TEXT NOT NULL,
    args_hash          TEXT NOT NULL,
    cwd                TEXT NOT NULL,
    policy_sha256      TEXT NOT NULL,
    base_policy_sha256 TEXT NOT NULL,
    policy_name        TEXT NOT NULL,
    command            TEXT NOT NULL,
    shell              INTEGER NOT NULL,
    rule               TEXT NOT NULL,
    risk               TEXT NOT NULL,
    reason             TEXT NOT NULL,
    approvers          TEXT NOT NULL,
    created_ms         INTEGER NOT NULL,
    expires_ms         INTEGER NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'rejected', 'used')),
    decided_by         INTEGER,
    decided_ms         INTEGER,
    used_by            TEXT
);
";

const COLUMNS: &str = "id, uid, session, args_hash, cwd, policy_sha256, base_policy_sha256, \
    policy_name, command, shell, rule, risk, reason, approvers, created_ms, expires_ms, state, \
    decided_by, decided_ms, used_by";

fn risk_str(r: RiskLevel) -> &'static str {
    match r {
        RiskLevel::Low => "low",
        RiskLevel::Medium => "medium",
        RiskLevel::High => "high",
        RiskLevel::Critical => "critical",
    }
}

fn risk_parse(s: &str) -> RiskLevel {
    match s {
        "low" => RiskLevel::Low,
        "medium" => RiskLevel::Medium,
        "high" => RiskLevel::High,
        // Unknown text is read as the worst, never as harmless.
        _ => RiskLevel::Critical,
    }
}

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRecord> {
    let approvers: String = r.get(13)?;
    let state: String = r.get(16)?;
    Ok(ApprovalRecord {
        id: r.get(0)?,
        uid: r.get(1)?,
        session: r.get(2)?,
        args_hash: r.get(3)?,
        cwd: r.get(4)?,
        policy_sha256: r.get(5)?,
        base_policy_sha256: r.get(6)?,
        policy_name: r.get(7)?,
        command: r.get(8)?,
        shell: r.get::<_, i64>(9)? != 0,
        rule: r.get(10)?,
        risk: risk_parse(&r.get::<_, String>(11)?),
        reason: r.get(12)?,
        // An unreadable list names nobody: nobody may decide.
        approvers: serde_json::from_str(&approvers).unwrap_or_default(),
        created_ms: to_u64(r.get(14)?),
        expires_ms: to_u64(r.get(15)?),
        // An unknown state is treated as spent.
        state: ApprovalState::parse(&state).unwrap_or(ApprovalState::Used),
        decided_by: r.get(17)?,
        decided_ms: r.get::<_, Option<i64>>(18)?.map(to_u64),
        used_by: r.get(19)?,
    })
}

fn get(tx: &rusqlite::Connection, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
    Ok(tx
        .query_row(
            &format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"),
            params![id],
            from_row,
        )
        .optional()?)
}

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl SqliteStore {
    /// Records a new pending approval.
    pub fn approval_create(&self, a: &ApprovalRecord) -> Result<(), StoreError> {
        let approvers = serde_json::to_string(&a.approvers).map_err(StoreError::Encode)?;
        self.conn().execute(
            &format!(
                "INSERT INTO approvals ({COLUMNS}) VALUES
                 (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                  NULL, NULL, NULL)"
            ),
            params![
                a.id,
                a.uid,
                a.session,
                a.args_hash,
                a.cwd,
                a.policy_sha256,
                a.base_policy_sha256,
                a.policy_name,
                a.command,
                i64::from(a.shell),
                a.rule,
                risk_str(a.risk),
                a.reason,
                approvers,
                ms(a.created_ms),
                ms(a.expires_ms),
                a.state.as_str(),
            ],
        )?;
        Ok(())
    }

    /// The approval `id`, whatever its state.
    pub fn approval_get(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        get(&self.conn(), id)
    }

    /// Every approval, newest first; only those still pending and not
    /// expired unless `all`.
    pub fn approvals_list(&self, all: bool) -> Result<Vec<ApprovalRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM approvals
             WHERE ?1 OR (state = 'pending' AND expires_ms > ?2)
             ORDER BY created_ms DESC"
        ))?;
        let rows = stmt.query_map(params![all, now_ms()], from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A human's decision on a pending approval, by `uid` (the kernel's
    /// word for who runs the deciding process). Refused unless `uid` is
    /// one of the approval's approvers and it is still pending and fresh.
    pub fn approval_decide(
        &self,
        id: &str,
        approve: bool,
        uid: u32,
    ) -> Result<Result<ApprovalRecord, DecideRefusal>, StoreError> {
        let now = to_u64(now_ms());
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let Some(mut a) = get(&tx, id)? else {
            return Ok(Err(DecideRefusal::Unknown));
        };
        if !a.approvers.contains(&uid) {
            return Ok(Err(DecideRefusal::NotApprover {
                uid,
                approvers: a.approvers,
            }));
        }
        if a.state != ApprovalState::Pending {
            return Ok(Err(DecideRefusal::Decided(a.state)));
        }
        if a.is_expired(now) {
            return Ok(Err(DecideRefusal::Expired));
        }
        a.state = if approve {
            ApprovalState::Approved
        } else {
            ApprovalState::Rejected
        };
        a.decided_by = Some(uid);
        a.decided_ms = Some(now);
        tx.execute(
            "UPDATE approvals SET state = ?2, decided_by = ?3, decided_ms = ?4 WHERE id = ?1",
            params![id, a.state.as_str(), uid, ms(now)],
        )?;
        tx.commit()?;
        Ok(Ok(a))
    }

    /// Spends the approval `id` on `call_id` when the request matches what
    /// was approved; otherwise says why not and leaves it as it was.
    pub fn approval_use(
        &self,
        id: &str,
        binding: &Binding<'_>,
        call_id: &str,
    ) -> Result<UseOutcome, StoreError> {
        let now = to_u64(now_ms());
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let Some(mut a) = get(&tx, id)? else {
            return Ok(UseOutcome::Refused(UseRefusal::Unknown));
        };
        let refusal =
            if a.uid != binding.session.uid() || a.session != binding.session.label_or_default() {
                Some(UseRefusal::Mismatch { what: "session" })
            } else if a.cwd != binding.cwd {
                Some(UseRefusal::Mismatch {
                    what: "working directory",
                })
            } else if a.args_hash != binding.args_hash {
                Some(UseRefusal::Mismatch { what: "arguments" })
            } else if a.policy_sha256 != binding.policy_sha256 {
                Some(UseRefusal::Mismatch { what: "policy" })
            } else {
                match a.state {
                    ApprovalState::Used => Some(UseRefusal::Used {
                        by_call: a.used_by.clone(),
                    }),
                    ApprovalState::Rejected => Some(UseRefusal::Rejected { by: a.decided_by }),
                    _ if a.is_expired(now) => Some(UseRefusal::Expired {
                        expires_ms: a.expires_ms,
                    }),
                    ApprovalState::Pending => Some(UseRefusal::Pending {
                        expires_ms: a.expires_ms,
                    }),
                    ApprovalState::Approved => None,
                }
            };
        if let Some(r) = refusal {
            return Ok(UseOutcome::Refused(r));
        }
        tx.execute(
            "UPDATE approvals SET state = 'used', used_by = ?2 WHERE id = ?1 AND state = 'approved'",
            params![id, call_id],
        )?;
        tx.commit()?;
        a.state = ApprovalState::Used;
        a.used_by = Some(call_id.to_string());
        Ok(UseOutcome::Granted(Box::new(a)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::SessionId;
    use std::sync::Arc;

    fn record(id: &str, expires_ms: u64) -> ApprovalRecord {
        ApprovalRecord {
            id: id.into(),
            uid: 1000,
            session: "s".into(),
            args_hash: "h".into(),
            cwd: "/p".into(),
            policy_sha256: "p".into(),
            base_policy_sha256: "p".into(),
            policy_name: "n".into(),
            command: "rm x".into(),
            shell: true,
            rule: "rm".into(),
            risk: RiskLevel::High,
            reason: "deletes".into(),
            approvers: vec![1000, 0],
            created_ms: 0,
            expires_ms,
            state: ApprovalState::Pending,
            decided_by: None,
            decided_ms: None,
            used_by: None,
        }
    }

    #[test]
    fn concurrent_uses_spend_an_approval_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        store
            .approval_create(&record("ap-1", u64::MAX / 2))
            .unwrap();
        assert!(store.approval_decide("ap-1", true, 1000).unwrap().is_ok());
        let granted: usize = (0..8)
            .map(|n| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let session = SessionId::new(1000, Some("s"));
                    let b = Binding {
                        session: &session,
                        args_hash: "h",
                        cwd: "/p",
                        policy_sha256: "p",
                    };
                    let out = store.approval_use("ap-1", &b, &format!("c{n}")).unwrap();
                    usize::from(matches!(out, UseOutcome::Granted(_)))
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!(granted, 1);
        let after = store.approval_get("ap-1").unwrap().unwrap();
        assert_eq!(after.state, ApprovalState::Used);
        assert!(after.used_by.is_some());
    }

    #[test]
    fn only_listed_uids_decide_and_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        store
            .approval_create(&record("ap-2", u64::MAX / 2))
            .unwrap();
        store.approval_create(&record("ap-3", 1)).unwrap();
        assert!(matches!(
            store.approval_decide("ap-2", true, 7).unwrap(),
            Err(DecideRefusal::NotApprover { uid: 7, .. })
        ));
        let decided = store.approval_decide("ap-2", false, 0).unwrap().unwrap();
        assert_eq!(
            (decided.state, decided.decided_by),
            (ApprovalState::Rejected, Some(0))
        );
        assert_eq!(
            store.approval_decide("ap-2", true, 0).unwrap(),
            Err(DecideRefusal::Decided(ApprovalState::Rejected))
        );
        assert_eq!(
            store.approval_decide("ap-3", true, 0).unwrap(),
            Err(DecideRefusal::Expired)
        );
        assert_eq!(
            store.approval_decide("ap-9", true, 0).unwrap(),
            Err(DecideRefusal::Unknown)
        );
        // Pending and fresh only, unless all are asked for.
        assert!(store.approvals_list(false).unwrap().is_empty());
        assert_eq!(store.approvals_list(true).unwrap().len(), 2);
    }
}
