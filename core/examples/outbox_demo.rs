//! The outbox at work, across two processes sharing one SQLite file.
//!
//! `cargo run -p honker --example outbox_demo [DB]` starts a worker process
//! (this program with `worker` as its first argument), then acts as a shop:
//! each order row and its confirmation email are written in one transaction.
//! One order's transaction fails and rolls back, so its email never exists.
//! The worker claims and "sends" emails as they commit; the shop finally
//! prints the queue's stats.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use honker::{ClaimOptions, Database, EnqueueOptions};
use serde_json::json;

const ORDERS: [(&str, i64); 4] = [
    ("alice@example.com", 1200),
    ("bob@example.com", 450),
    ("mallory@example.com", -1), // refused: the whole transaction rolls back
    ("carol@example.com", 3000),
];

fn main() -> honker::Result<()> {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("worker") {
        let path = args.next().expect("worker needs a database path");
        let expect: usize = args.next().expect("and a count").parse().expect("count");
        return worker(&path, expect);
    }
    let path = first.unwrap_or_else(|| {
        let dir = std::env::temp_dir().join(format!("honker-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("demo dir");
        dir.join("shop.db").to_string_lossy().into_owned()
    });
    shop(&path)
}

fn shop(path: &str) -> honker::Result<()> {
    let db = Database::open(path)?;
    db.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT NOT NULL,
                              cents INTEGER NOT NULL CHECK (cents > 0))",
        [],
    )?;
    let emails = db.queue("emails")?;
    let committed = ORDERS.iter().filter(|(_, c)| *c > 0).count();

    let mut worker = Command::new(std::env::current_exe().expect("own path"))
        .args(["worker", path, &committed.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the worker process");
    let worker_out = worker.stdout.take().expect("worker stdout");
    let worker_pid = worker.id();
    let printer = std::thread::spawn(move || {
        for line in BufReader::new(worker_out).lines().map_while(Result::ok) {
            println!("  [worker, pid {worker_pid}] {line}");
        }
    });
    println!(
        "[shop, pid {}] writing orders to {path}",
        std::process::id()
    );

    let placed = place_orders(&db, &emails);
    let status = worker.wait().expect("worker exit");
    printer.join().expect("printer");
    placed?;
    assert!(status.success(), "worker failed");
    let s = emails.stats()?;
    let orders = db.query("SELECT count(*) FROM orders", [])?;
    println!(
        "[inspector] orders: {:?}; emails ready {}, running {}, dead {}",
        orders.rows[0][0], s.ready, s.running, s.dead
    );
    Ok(())
}

fn place_orders(db: &Database, emails: &honker::Queue) -> honker::Result<()> {
    for (email, cents) in ORDERS {
        let tx = db.transaction()?;
        let job = emails.enqueue_tx(
            &tx,
            json!({"to": email, "template": "order-confirmed"}),
            &EnqueueOptions::default(),
        )?;
        match tx.execute(
            "INSERT INTO orders (email, cents) VALUES (?1, ?2)",
            honker::rusqlite::params![email, cents],
        ) {
            Ok(_) => {
                tx.commit()?;
                println!(
                    "[shop] order for {email} committed with email job {}",
                    job.id
                );
            }
            Err(e) => {
                drop(tx); // rolls back the job together with the order
                println!(
                    "[shop] order for {email} failed ({}): rolled back, no email",
                    e.code()
                );
            }
        }
        // Pace the orders so the worker's output interleaves visibly.
        std::thread::sleep(Duration::from_millis(150));
    }
    Ok(())
}

fn worker(path: &str, expect: usize) -> honker::Result<()> {
    let db = Database::open(path)?;
    let emails = db.queue("emails")?;
    let wait = ClaimOptions {
        wait: Duration::from_secs(10),
        ..ClaimOptions::default()
    };
    let mut sent = 0;
    while sent < expect {
        let jobs = emails.claim_with("mailer-1", 8, &wait)?;
        if jobs.is_empty() {
            eprintln!("worker: no email for 10 s, giving up");
            std::process::exit(1);
        }
        for job in jobs {
            let to = job.payload.as_json()?["to"].clone();
            println!(
                "sent confirmation to {to} (job {}, attempt {})",
                job.id, job.attempts
            );
            job.ack()?;
            sent += 1;
        }
    }
    Ok(())
}
