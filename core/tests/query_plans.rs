//! `EXPLAIN QUERY PLAN` pins: with 100k running, 100k scheduled and 100k dead
//! rows present, claiming, promotion, lease reclaim, expiry and the lease
//! checks are index seeks, never a scan, and claim needs no sort.

mod common;

use honker::queue::statements as sql;
use honker::rusqlite::types::Value;
use honker::rusqlite::{params_from_iter, Connection};

const N: i64 = 100_000;

fn fill(conn: &Connection) {
    let now = 1_700_000_000_000i64;
    let insert = |state: &str, extra: &str| {
        conn.execute_batch(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {N})
             INSERT INTO _honker_jobs (queue, state, payload, run_at, max_attempts,
                 backoff_base_ms, backoff_max_ms, backoff_jitter, created_at, {cols})
             SELECT 'q' || (i % 4), '{state}', '{{}}', {now} + i, 3, 1000, 60000, 0.5, {now}, {extra}
             FROM n",
            cols = if state == "running" {
                "worker_id, lease_token, lease_expires_at, attempts"
            } else {
                "expires_at"
            },
        ))
        .unwrap();
    };
    insert(
        "running",
        &format!("'w', hex(randomblob(16)), {now} + 60000 + i, 1"),
    );
    insert("scheduled", &format!("{now} + 10000000 + i"));
    conn.execute_batch(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {N})
         INSERT INTO _honker_finished (id, queue, state, payload, priority, run_at, attempts,
             max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, created_at,
             last_error, finished_at)
         SELECT 10000000 + i, 'q' || (i % 4), 'dead', '{{}}', 0, {now}, 3, 3, 1000, 60000, 0.5,
             {now}, 'boom', {now} + i
         FROM n"
    ))
    .unwrap();
    // A few ready jobs.
    conn.execute_batch(&format!(
        "INSERT INTO _honker_jobs (queue, state, payload, run_at, max_attempts,
             backoff_base_ms, backoff_max_ms, backoff_jitter, created_at)
         VALUES ('q1', 'ready', '{{}}', {now}, 3, 1000, 60000, 0.5, {now})"
    ))
    .unwrap();
}

fn plan(conn: &Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let n = stmt.parameter_count();
    let nulls = vec![Value::Null; n];
    stmt.query_map(params_from_iter(nulls), |r| r.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Asserts the plan of `sql` mentions every one of `uses` and never scans a
/// honker table or sorts in a temporary b-tree.
fn assert_plan(conn: &Connection, name: &str, sql: &str, uses: &[&str]) {
    let p = plan(conn, sql);
    let text = p.join("\n");
    for u in uses {
        assert!(text.contains(u), "{name}: expected {u:?} in plan:\n{text}");
    }
    for line in &p {
        assert!(
            !(line.starts_with("SCAN _honker") || line.contains("TEMP B-TREE")),
            "{name}: scan or sort in plan:\n{text}"
        );
    }
}

fn check_all(conn: &Connection) {
    let ready = "INDEX _honker_jobs_ready (queue=?)";
    let scheduled = "INDEX _honker_jobs_scheduled (queue=? AND run_at<?)";
    let running = "INDEX _honker_jobs_running (queue=? AND lease_expires_at<?)";
    let pk = "USING INTEGER PRIMARY KEY (rowid=?)";
    // The pause check (ADR 33): seeks of the settings' key, never a scan.
    let paused = [
        "SEARCH _honker_settings USING PRIMARY KEY (scope=?)",
        "SEARCH _honker_settings USING PRIMARY KEY (scope=? AND name=? AND key=?)",
    ];
    assert_plan(conn, "PICK", sql::PICK, &[&[ready][..], &paused].concat());
    assert_plan(conn, "LEASE", sql::LEASE, &[pk]);
    // Concurrency caps (ADR 35): a keyed pick walks the ready index as the
    // plain one does; the counts read the running index.
    assert_plan(
        conn,
        "PICK_KEYED",
        &sql::PICK_KEYED,
        &[&[ready][..], &paused].concat(),
    );
    assert_plan(
        conn,
        "PICK_KEYS",
        &sql::PICK_KEYS,
        &[&[ready][..], &paused].concat(),
    );
    assert_plan(
        conn,
        "CLAIM_CONTROLS",
        sql::CLAIM_CONTROLS,
        &[
            "SEARCH _honker_settings USING PRIMARY KEY (scope=? AND name=?)",
            "INDEX _honker_jobs_running (queue=? AND lease_expires_at>?)",
        ],
    );
    assert_plan(
        conn,
        "RUNNING_KEYS",
        sql::RUNNING_KEYS,
        &["INDEX _honker_jobs_running (queue=? AND lease_expires_at>?)"],
    );
    assert_plan(conn, "READY_UNCAPPED", sql::READY_UNCAPPED, &[ready]);
    // Fair tenants (ADR 36): a round-robin pick is the same walk of the
    // ready index (which sorts by turn after priority: no sort), its keys'
    // limits one seek of their rows' primary key per job read; a key's
    // turns and tat are seeks of that key too; delayed jobs take turns
    // from the scheduled index.
    let key_row = "SEARCH k USING PRIMARY KEY (name=? AND key=?)";
    let joined_key = "SEARCH _honker_queue_keys USING PRIMARY KEY (name=? AND key=?)";
    for (bits, pick) in sql::PICK_FAIR.iter().enumerate() {
        let mut uses = vec![ready, paused[0], paused[1]];
        if bits & sql::FAIR_LIMITED != 0 {
            uses.push(joined_key);
        }
        assert_plan(conn, &format!("PICK_FAIR[{bits}]"), pick, &uses);
    }
    assert_plan(conn, "READY_OPEN", sql::READY_OPEN, &[ready, key_row]);
    assert_plan(
        conn,
        "GIVE_TURNS",
        sql::GIVE_TURNS,
        &["SEARCH _honker_settings USING PRIMARY KEY (scope=? AND name=? AND key=?)"],
    );
    assert_plan(
        conn,
        "KEY_TURN",
        sql::KEY_TURN,
        &["SEARCH _honker_queue_keys USING PRIMARY KEY (name=? AND key=?)"],
    );
    assert_plan(
        conn,
        "SET_TURNS",
        sql::SET_TURNS,
        &["INTEGER PRIMARY KEY (rowid>? AND rowid<?)"],
    );
    assert_plan(conn, "DUE_UNTURNED", sql::DUE_UNTURNED, &[scheduled]);
    assert_plan(
        conn,
        "FIRST_HELD_KEY",
        sql::FIRST_HELD_KEY,
        &["SEARCH _honker_queue_keys USING PRIMARY KEY (name=?)"],
    );
    // Unique holds (ADR 37): seeks of the dedupe index and of the holds'
    // primary key; the holder's job by its id.
    let dedupe = "INDEX _honker_jobs_dedupe (queue=? AND dedupe_key=?)";
    let hold = "SEARCH _honker_unique USING PRIMARY KEY (queue=? AND key=?)";
    assert_plan(conn, "HOLD", sql::HOLD, &[hold]);
    assert_plan(conn, "TAKE_HOLD", sql::TAKE_HOLD, &[]);
    assert_plan(conn, "END_HOLD", sql::END_HOLD, &[hold]);
    assert_plan(conn, "REPLACE_PENDING", sql::REPLACE_PENDING, &[dedupe]);
    assert_plan(conn, "DETACH_RUNNING", sql::DETACH_RUNNING, &[dedupe]);
    assert_plan(conn, "DROP_LIVE_HOLD", sql::DROP_LIVE_HOLD, &[hold]);
    assert_plan(conn, "HOLD_ANY", sql::HOLD_ANY, &[hold]);
    assert_plan(conn, "LEASED_KEY", sql::LEASED_KEY, &[pk]);
    assert_plan(conn, "FIND_BY_DEDUPE", sql::FIND_BY_DEDUPE, &[dedupe]);
    assert_plan(conn, "PROMOTE", sql::PROMOTE, &[scheduled]);
    assert_plan(conn, "RECLAIM", sql::RECLAIM, &[running]);
    assert_plan(
        conn,
        "HOUSEKEEPING_DUE",
        sql::HOUSEKEEPING_DUE,
        &[
            "INDEX _honker_jobs_expiry (queue=? AND expires_at<?)",
            scheduled,
            running,
            "INDEX _honker_jobs_scheduled (queue=? AND run_at>?)",
            "INDEX _honker_jobs_running (queue=? AND lease_expires_at>?)",
        ],
    );
    assert_plan(
        conn,
        "DAMAGED_TIMES",
        sql::DAMAGED_TIMES,
        &[
            "INDEX _honker_jobs_scheduled (queue=? AND run_at>?)",
            "INDEX _honker_jobs_running (queue=? AND lease_expires_at>?)",
        ],
    );
    assert_plan(conn, "LAPSED_EXHAUSTED", sql::LAPSED_EXHAUSTED, &[running]);
    assert_plan(
        conn,
        "DUE_EXPIRED",
        sql::DUE_EXPIRED,
        &["INDEX _honker_jobs_expiry (queue=? AND expires_at<?)"],
    );
    for (name, q) in [
        ("ACK", sql::ACK),
        ("LEASED", sql::LEASED),
        ("HEARTBEAT", sql::HEARTBEAT),
        ("RESCHEDULE", sql::RESCHEDULE),
        ("DELETE_JOB", sql::DELETE_JOB),
        ("GET_LIVE", sql::GET_LIVE),
        ("ARCHIVE", sql::ARCHIVE),
        ("LEASE_BY_WORKER", sql::LEASE_BY_WORKER),
    ] {
        assert_plan(conn, name, q, &[pk]);
    }
    assert_plan(
        conn,
        "FIND_BY_DEDUPE",
        sql::FIND_BY_DEDUPE,
        &["INDEX _honker_jobs_dedupe (queue=? AND dedupe_key=?)"],
    );
    assert_plan(
        conn,
        "PROBE",
        sql::PROBE,
        &[
            "_honker_jobs_ready (queue=?)",
            "_honker_jobs_scheduled (queue=?)",
            "_honker_jobs_running (queue=?)",
            paused[0],
            paused[1],
        ],
    );
    assert_plan(
        conn,
        "NEXT_CLAIM_AT",
        sql::NEXT_CLAIM_AT,
        &[
            "INDEX _honker_jobs_scheduled (queue=? AND run_at>?)",
            "INDEX _honker_jobs_running (queue=? AND lease_expires_at>?)",
        ],
    );
    assert_plan(
        conn,
        "LIST_DEAD",
        sql::LIST_DEAD,
        &["INDEX _honker_finished_queue (queue=? AND state=? AND id>?)"],
    );
    assert_plan(
        conn,
        "PRUNE_FINISHED",
        sql::PRUNE_FINISHED,
        &["_honker_finished_age (state=? AND finished_at<?)"],
    );
    assert_plan(
        conn,
        "PRUNE_RESULTS",
        sql::PRUNE_RESULTS,
        &[
            "_honker_results_age (created_at<?)",
            "_honker_results_expiry (expires_at<?)",
        ],
    );
    assert_plan(
        conn,
        "SWEEP_RESULTS",
        sql::SWEEP_RESULTS,
        &["_honker_results_expiry (expires_at<?)"],
    );
    for (name, q) in [
        ("GET_RESULT", sql::GET_RESULT),
        ("GET_RESULT_BY_ID", sql::GET_RESULT_BY_ID),
    ] {
        assert_plan(conn, name, q, &["INTEGER PRIMARY KEY"]);
    }
}

#[test]
fn hot_statements_use_their_partial_indexes() {
    let t = common::test_db();
    let tx = t.db.transaction().unwrap();
    let conn = tx.connection().unwrap();
    fill(conn);
    check_all(conn);
    // And still after the planner has statistics.
    conn.execute_batch("ANALYZE").unwrap();
    check_all(conn);
}

/// 1,000,000 events over 10 streams and 100 consumers: publish, read, the
/// consumer offsets and info are index seeks (ADR 20).
#[test]
fn stream_statements_seek_their_keys() {
    use honker::stream::statements as st;
    let t = common::test_db();
    let tx = t.db.transaction().unwrap();
    let conn = tx.connection().unwrap();
    let now = 1_700_000_000_000i64;
    conn.execute_batch(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999999)
         INSERT INTO _honker_stream_events (stream, offset, key, payload, created_at)
         SELECT 's' || (i % 10), i / 10 + 1, NULL, '{{}}', {now} FROM n;
         INSERT INTO _honker_streams (name, last_offset, created_at)
         SELECT DISTINCT stream, 100000, {now} FROM _honker_stream_events;
         WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99)
         INSERT INTO _honker_stream_offsets (stream, consumer, next_offset, updated_at)
         SELECT 's' || (i % 10), 'c' || i, i * 100 + 1, {now} FROM n;"
    ))
    .unwrap();
    let check = |conn: &Connection| {
        for (name, q) in [("ADVANCE", st::ADVANCE), ("LAST_OFFSET", st::LAST_OFFSET)] {
            assert_plan(conn, name, q, &["PRIMARY KEY (name=?)"]);
        }
        let offset_index = "_honker_stream_events_offset (stream=?";
        for (name, q) in [
            ("READ_AFTER", st::READ_AFTER),
            ("FIRST_OFFSET", st::FIRST_OFFSET),
        ] {
            assert_plan(conn, name, q, &[offset_index]);
        }
        // A count over either (stream, …) index, without touching the rows.
        assert_plan(
            conn,
            "LENGTH",
            st::LENGTH,
            &["USING COVERING INDEX", "(stream=?)"],
        );
        assert_plan(conn, "READ_AFTER", st::READ_AFTER, &["offset>?"]);
        assert_plan(
            conn,
            "FIRST_AT",
            st::FIRST_AT,
            &["_honker_stream_events_time (stream=? AND created_at>?)"],
        );
        for (name, q) in [
            ("GET_POSITION", st::GET_POSITION),
            ("CONSUMERS", st::CONSUMERS),
            ("FIND_KEY", st::FIND_KEY),
            ("MIN_CONSUMER", st::MIN_CONSUMER),
        ] {
            assert_plan(conn, name, q, &["PRIMARY KEY (stream=?"]);
        }
        // Retention: a range of the offset index, and the keys' age index.
        assert_plan(
            conn,
            "TRIM_BELOW",
            st::TRIM_BELOW,
            &["_honker_stream_events_offset (stream=? AND offset<?)"],
        );
        assert_plan(
            conn,
            "HEAD_FROM",
            st::HEAD_FROM,
            &[
                "PRIMARY KEY (name=?)",
                "_honker_stream_events_offset (stream=? AND offset>?)",
            ],
        );
        assert_plan(
            conn,
            "SWEEP_KEYS",
            st::SWEEP_KEYS,
            &["_honker_stream_publish_keys_age (created_at<?)"],
        );
    };
    check(conn);
    conn.execute_batch("ANALYZE").unwrap();
    check(conn);
}

#[test]
fn channel_statements_seek_their_keys() {
    use honker::channel::statements as st;
    let t = common::test_db();
    let tx = t.db.transaction().unwrap();
    let conn = tx.connection().unwrap();
    let now = 1_700_000_000_000i64;
    conn.execute_batch(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999999)
         INSERT INTO _honker_channel_messages (channel, seq, payload, created_at)
         SELECT 'c' || (i % 10), i / 10 + 1, '{{}}', {now} FROM n;
         INSERT INTO _honker_channels (name, last_seq, created_at)
         SELECT DISTINCT channel, 100000, {now} FROM _honker_channel_messages;"
    ))
    .unwrap();
    let check = |conn: &Connection| {
        assert_plan(conn, "ADVANCE", st::ADVANCE, &["PRIMARY KEY (name=?)"]);
        let index = "_honker_channel_messages_channel (channel=?";
        assert_plan(conn, "READ_AFTER", st::READ_AFTER, &[index, "id>?"]);
        assert_plan(conn, "HEAD", st::HEAD, &["PRIMARY KEY (name=?)", index]);
        assert_plan(
            conn,
            "HEAD_AFTER",
            st::HEAD_AFTER,
            &["PRIMARY KEY (name=?)", "id>?"],
        );
        assert_plan(
            conn,
            "TRIM",
            st::TRIM,
            &[index, "USING INTEGER PRIMARY KEY (rowid=?)"],
        );
    };
    check(conn);
    conn.execute_batch("ANALYZE").unwrap();
    check(conn);
}

#[test]
fn group_statements_seek_their_keys() {
    use honker::stream::group::statements as st;
    let t = common::test_db();
    let tx = t.db.transaction().unwrap();
    let conn = tx.connection().unwrap();
    let now = 1_700_000_000_000i64;
    // 10 groups on one stream of 100,000 events; group g0 holds them all:
    // one delivered, the rest of its one key waiting behind it; 1,000 members.
    conn.execute_batch(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
         INSERT INTO _honker_stream_events (stream, offset, key, payload, created_at)
         SELECT 's', i, 'k', '{{}}', {now} FROM n;
         INSERT INTO _honker_streams (name, last_offset, created_at) VALUES ('s', 100000, {now});
         WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9)
         INSERT INTO _honker_stream_groups
             (stream, grp, next_offset, max_deliveries, lease_ms, member_idle_ms, created_at)
         SELECT 's', 'g' || i, 100001, 5, 60000, 86400000, {now} FROM n;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
         INSERT INTO _honker_stream_group_events
             (stream, grp, offset, key, state, deliveries, member, token, avail_at, updated_at)
         SELECT 's', 'g0', i, 'k', CASE i WHEN 1 THEN 'delivered' ELSE 'waiting' END,
                i = 1, CASE i WHEN 1 THEN 'm1' END, CASE i WHEN 1 THEN 't' END,
                CASE i WHEN 1 THEN {now} + 60000 END, {now} FROM n;
         WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999)
         INSERT INTO _honker_stream_group_members (stream, grp, member, joined_at, seen_at)
         SELECT 's', 'g' || (i % 10), 'm' || i, {now}, {now} FROM n;"
    ))
    .unwrap();
    let check = |conn: &Connection| {
        let pk = "PRIMARY KEY (stream=? AND grp=?";
        for (name, q) in [
            ("GET", st::GET),
            ("ADVANCE", st::ADVANCE),
            ("DROP_GROUP", st::DROP_GROUP),
            ("OF_STREAM", st::OF_STREAM),
        ] {
            assert_plan(conn, name, q, &["PRIMARY KEY (stream=?"]);
        }
        for (name, q) in [
            ("DELIVER", st::DELIVER),
            ("HELD", st::HELD),
            ("FINISH", st::FINISH),
            ("REQUEUE", st::REQUEUE),
            ("BURY", st::BURY),
            ("UNBLOCK", st::UNBLOCK),
            ("HEARTBEAT", st::HEARTBEAT),
            ("DEAD_KEY", st::DEAD_KEY),
            ("REDRIVE", st::REDRIVE),
            ("FIRST_HELD", st::FIRST_HELD),
            ("TRIMMED_KEYS", st::TRIMMED_KEYS),
            ("TRIMMED_HELD", st::TRIMMED_HELD),
            ("DROP_EVENTS", st::DROP_EVENTS),
            ("DROP_MEMBERS", st::DROP_MEMBERS),
            ("REMOVE_MEMBER", st::REMOVE_MEMBER),
            ("MEMBERS", st::MEMBERS),
            ("PENDING", st::PENDING),
            ("OLDEST_PENDING", st::OLDEST_PENDING),
        ] {
            assert_plan(conn, name, q, &[pk]);
        }
        // The claim's pick never walks the 99,999 waiting events.
        assert_plan(
            conn,
            "PICK",
            st::PICK,
            &["_honker_stream_group_events_avail (stream=? AND grp=? AND avail_at<?)"],
        );
        for (name, q) in [("KEY_BUSY", st::KEY_BUSY), ("KEY_HEAD", st::KEY_HEAD)] {
            assert_plan(
                conn,
                name,
                q,
                &["_honker_stream_group_events_key (stream=? AND grp=? AND key=?)"],
            );
        }
        assert_plan(
            conn,
            "HOLDS",
            st::HOLDS,
            &["_honker_stream_group_events_member (stream=? AND grp=? AND member=?)"],
        );
        assert_plan(
            conn,
            "DISOWN",
            st::DISOWN,
            &["_honker_stream_group_events_member (stream=? AND grp=? AND member=?)"],
        );
        assert_plan(
            conn,
            "DEAD",
            st::DEAD,
            &["_honker_stream_group_events_dead (stream=? AND grp=? AND offset>?)"],
        );
        assert_plan(
            conn,
            "INCOMING",
            st::INCOMING,
            &["_honker_stream_events_offset (stream=? AND offset>?)"],
        );
        assert_plan(
            conn,
            "PROBE",
            st::PROBE,
            &[
                "PRIMARY KEY (stream=? AND grp=?)",
                "PRIMARY KEY (name=?)",
                "_honker_stream_group_events_avail (stream=? AND grp=? AND avail_at>?)",
            ],
        );
        assert_plan(
            conn,
            "EVENT",
            st::EVENT,
            &["_honker_stream_events_offset (stream=? AND offset=?)"],
        );
    };
    check(conn);
    conn.execute_batch("ANALYZE").unwrap();
    check(conn);
}

#[test]
fn lock_statements_seek_their_keys() {
    use honker::lock::statements as st;
    let t = common::test_db();
    let tx = t.db.transaction().unwrap();
    let conn = tx.connection().unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999)
         INSERT INTO _honker_lock_holders (name, owner, token, acquired_at, expires_at)
         SELECT 'lock-' || i, 'o', i + 1, 0, i FROM n;",
    )
    .unwrap();
    let check = |conn: &Connection| {
        let key = "PRIMARY KEY (name=?)";
        for (name, sql) in [
            ("GET", st::GET),
            ("RENEW", st::RENEW),
            ("RENEW_BY_OWNER", st::RENEW_BY_OWNER),
            ("RELEASE", st::RELEASE),
            ("RELEASE_BY_OWNER", st::RELEASE_BY_OWNER),
        ] {
            assert_plan(conn, name, sql, &[key]);
        }
        assert_plan(
            conn,
            "NEXT_TOKEN",
            st::NEXT_TOKEN,
            &["PRIMARY KEY (name=?)"],
        );
        assert_plan(conn, "WALK", st::WALK, &["PRIMARY KEY (name>?)"]);
        assert_plan(conn, "SWEEP_ONE", st::SWEEP_ONE, &[key]);
    };
    check(conn);
    conn.execute_batch("ANALYZE").unwrap();
    check(conn);
}

#[test]
fn rate_limit_statements_seek_their_keys() {
    use honker::rate::statements as st;
    let t = common::test_db();
    let tx = t.db.transaction().unwrap();
    let conn = tx.connection().unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999)
         INSERT INTO _honker_rate_limit_keys (name, key, tat_us)
         SELECT 'rl-' || (i % 10), 'k' || i, i FROM n;",
    )
    .unwrap();
    let check = |conn: &Connection| {
        assert_plan(conn, "GET", st::GET, &["PRIMARY KEY (name=? AND key=?)"]);
        assert_plan(
            conn,
            "PARAMS",
            st::PARAMS,
            &["PRIMARY KEY (scope=? AND name=?)"],
        );
        // Maintenance walks the keys in key order, a batch at a time, and
        // deletes each refilled one by its key (there is no index on tat).
        assert_plan(conn, "WALK", st::WALK, &["PRIMARY KEY ((name,key)>(?,?))"]);
        assert_plan(
            conn,
            "SWEEP_ONE",
            st::SWEEP_ONE,
            &["PRIMARY KEY (name=? AND key=?)"],
        );
    };
    check(conn);
    conn.execute_batch("ANALYZE").unwrap();
    check(conn);
}

/// With 10,000 schedules (a few paused, a few buffered), what a tick and a
/// waiting runner read is a seek on the due index: finding what is due
/// costs the same with 10 or 10,000 schedules.
#[test]
fn scheduler_statements_seek_the_due_index() {
    use honker::schedule::statements as st;
    let t = common::test_db();
    let tx = t.db.transaction().unwrap();
    let conn = tx.connection().unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)
         INSERT INTO _honker_schedules (name, queue, spec, time_zone, day_rule, payload,
             priority, catch_up, catch_up_window_ms, catch_up_max, overlap, jitter_ms,
             anchor_ms, paused, next_fire_at, buffered_at, created_at, updated_at)
         SELECT 's' || i, 'q', '* * * * *', 'UTC', 'or', 'null', 0, 'latest', 86400000, 100,
             'allow', 0, 0, i % 100 = 0, 1700000000000 + i * 1000,
             CASE WHEN i % 1000 = 0 THEN 1700000000000 END, 0, 0
         FROM n;",
    )
    .unwrap();
    let check = |conn: &Connection| {
        assert_plan(
            conn,
            "DUE",
            st::DUE,
            &["_honker_schedules_due (next_fire_at<?)"],
        );
        assert_plan(
            conn,
            "NEXT_DUE",
            st::NEXT_DUE,
            &["_honker_schedules_due (next_fire_at>?)"],
        );
        assert_plan(
            conn,
            "BUFFERED_READY",
            st::BUFFERED_READY,
            &["_honker_schedules_buffered"],
        );
        assert_plan(
            conn,
            "GET",
            st::GET,
            &["sqlite_autoindex__honker_schedules_1 (name=?)"],
        );
        assert_plan(
            conn,
            "PRUNE_FIRES",
            st::PRUNE_FIRES,
            &["PRIMARY KEY (schedule=? AND fire_at<?)"],
        );
        assert_plan(
            conn,
            "WALK",
            st::WALK,
            &["sqlite_autoindex__honker_schedules_1 (name>?)"],
        );
    };
    check(conn);
    conn.execute_batch("ANALYZE").unwrap();
    check(conn);
}
