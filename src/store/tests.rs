//! The SQLite store's keys, budgets, reservations and migration.

use super::*;

fn sid(uid: u32, label: &str) -> SessionId {
    SessionId::new(uid, Some(label))
}

fn one_session() -> SessionId {
    sid(1000, "s")
}

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
    assert_eq!(
        store.begin(&one_session(), "key-0001", "h1").unwrap(),
        Begin::Fresh
    );
    assert_eq!(
        store.begin(&one_session(), "key-0001", "h1").unwrap(),
        Begin::InFlight
    );
    store
        .finish(&one_session(), "key-0001", "h1", &ok_result("hello"))
        .unwrap();
    let Begin::Duplicate(r) = store.begin(&one_session(), "key-0001", "h1").unwrap() else {
        panic!("not duplicate")
    };
    assert!(r.duplicate);
    assert_eq!(r.stdout, "hello");
    assert_eq!(
        r.id, None,
        "the stored id must not leak into another exchange"
    );
    assert_eq!(
        store.begin(&one_session(), "key-0001", "h2").unwrap(),
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
        assert_eq!(
            store.begin(&one_session(), "key-0002", "h").unwrap(),
            Begin::Fresh
        );
        store
            .finish(&one_session(), "key-0002", "h", &ok_result("kept"))
            .unwrap();
    }
    let store = SqliteStore::open(dir.path()).unwrap();
    let Begin::Duplicate(r) = store.begin(&one_session(), "key-0002", "h").unwrap() else {
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
            "INSERT INTO idempotency
                 (uid, session, key, args_hash, state, owner_pid, owner_start, created_ms)
             VALUES (1000, 's', 'key-dead', 'h', 'running', 0, 0, 0)",
            [],
        )
        .unwrap();
    drop(store);
    let store = SqliteStore::open(dir.path()).unwrap();
    let Begin::Duplicate(r) = store.begin(&one_session(), "key-dead", "h").unwrap() else {
        panic!("not settled")
    };
    assert_eq!(r.error_type, Some(ErrorType::Cancelled));
    assert!(r.duplicate);
    assert!(matches!(
        store.finish(&one_session(), "key-dead", "h", &ok_result("late")),
        Err(StoreError::NotReserved { .. })
    ));
}

#[test]
fn a_live_reservation_of_this_process_stays_in_flight_across_handles() {
    let dir = tempfile::tempdir().unwrap();
    let a = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(
        a.begin(&one_session(), "key-live", "h").unwrap(),
        Begin::Fresh
    );
    // A second handle (another process in real life) sees a live owner.
    let b = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(
        b.begin(&one_session(), "key-live", "h").unwrap(),
        Begin::InFlight
    );
}

#[test]
fn budget_is_spent_by_runs_or_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let session = BudgetPolicy {
        max_mutating_runs: 2,
        max_wall_ms: 1_000,
    };
    let budget = Budgets::per_uid_sessions(&session, 100);
    let s = sid(1000, "s");
    assert_eq!(store.budget_check(&s, &budget).unwrap(), None);
    store.budget_charge(&s, true, 10).unwrap();
    store.budget_charge(&s, false, 10).unwrap();
    assert_eq!(store.budget_check(&s, &budget).unwrap(), None);
    store.budget_charge(&s, true, 10).unwrap();
    let reason = store.budget_check(&s, &budget).unwrap().unwrap();
    assert!(reason.contains("2 of its 2 mutating runs"), "{reason}");
    assert_eq!(
        store.budget_check(&sid(1000, "other"), &budget).unwrap(),
        None
    );
    let t = sid(1000, "t");
    store.budget_charge(&t, false, 1_000).unwrap();
    assert!(
        store
            .budget_check(&t, &budget)
            .unwrap()
            .unwrap()
            .contains("ms")
    );
}

#[test]
fn a_uid_cannot_dodge_its_budget_by_rotating_labels() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let session = BudgetPolicy {
        max_mutating_runs: 2,
        max_wall_ms: 1_000_000,
    };
    // Each uid may spend three sessions' worth.
    let budget = Budgets::per_uid_sessions(&session, 3);
    for n in 0..6 {
        let s = sid(1000, &format!("label-{n}"));
        assert_eq!(store.budget_check(&s, &budget).unwrap(), None, "run {n}");
        store.budget_charge(&s, true, 1).unwrap();
    }
    let fresh = sid(1000, "never-used");
    let reason = store.budget_check(&fresh, &budget).unwrap().unwrap();
    assert!(reason.contains("uid 1000 has used 6 of the 6"), "{reason}");
    // Another uid spends its own budget.
    assert_eq!(
        store
            .budget_check(&sid(1001, "never-used"), &budget)
            .unwrap(),
        None
    );
}

#[test]
fn keys_belong_to_one_session_of_one_uid() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let owner = sid(1000, "work");
    assert_eq!(store.begin(&owner, "key-0001", "h").unwrap(), Begin::Fresh);
    store
        .finish(&owner, "key-0001", "h", &ok_result("secret"))
        .unwrap();
    // Same key, same arguments, same label: another uid, or another
    // label of the same uid, starts fresh and sees nothing stored.
    assert_eq!(
        store.begin(&sid(1001, "work"), "key-0001", "h").unwrap(),
        Begin::Fresh
    );
    assert_eq!(
        store.begin(&sid(1000, "other"), "key-0001", "h").unwrap(),
        Begin::Fresh
    );
    assert!(matches!(
        store.begin(&owner, "key-0001", "h").unwrap(),
        Begin::Duplicate(r) if r.stdout == "secret"
    ));
    // A session without a label is the label `default`.
    let unlabelled = SessionId::new(1000, None);
    assert_eq!(
        store.begin(&unlabelled, "key-0002", "h").unwrap(),
        Begin::Fresh
    );
    assert_eq!(
        store.begin(&sid(1000, "default"), "key-0002", "h").unwrap(),
        Begin::InFlight
    );
}

#[test]
fn an_earlier_state_file_is_migrated_once() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = Connection::open(dir.path().join("state.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE calls (key TEXT PRIMARY KEY, args_hash TEXT NOT NULL,
                 state TEXT NOT NULL, owner_pid INTEGER NOT NULL, owner_start INTEGER NOT NULL,
                 result TEXT, created_ms INTEGER NOT NULL, finished_ms INTEGER);
             CREATE TABLE budgets (session TEXT PRIMARY KEY,
                 mutating_runs INTEGER NOT NULL DEFAULT 0, wall_ms INTEGER NOT NULL DEFAULT 0);
             INSERT INTO budgets VALUES ('a', 3, 30), ('b', 4, 40);",
        )
        .unwrap();
        let done = serde_json::to_string(&ok_result("old")).unwrap();
        conn.execute(
            "INSERT INTO calls VALUES ('key-old1', 'h', 'done', 0, 0, ?1, 0, 0)",
            params![done],
        )
        .unwrap();
    }
    let me = nix::unistd::geteuid().as_raw();
    let store = SqliteStore::open(dir.path()).unwrap();
    let Begin::Duplicate(r) = store
        .begin(&SessionId::new(me, None), "key-old1", "h")
        .unwrap()
    else {
        panic!("the old key was lost")
    };
    assert_eq!(r.stdout, "old");
    let session = BudgetPolicy {
        max_mutating_runs: 4,
        max_wall_ms: 1_000,
    };
    let b = Budgets::per_uid_sessions(&session, 2);
    assert_eq!(store.budget_check(&sid(me, "a"), &b).unwrap(), None);
    assert!(store.budget_check(&sid(me, "b"), &b).unwrap().is_some());
    drop(store);
    // Opening again changes nothing.
    let store = SqliteStore::open(dir.path()).unwrap();
    let reason = store.budget_check(&sid(me, "c"), &Budgets::per_uid_sessions(&session, 1));
    assert!(reason.unwrap().unwrap().contains("7 of the 4"));
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
