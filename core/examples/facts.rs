//! Prints the language-neutral facts every surface mirrors, as JSON, for
//! `scripts/facts.py` (which writes them into each binding's tables and
//! checks them in CI): the stable error codes and the job states, in core's
//! order.
fn main() {
    let codes: Vec<&str> = honker::ErrorKind::ALL.iter().map(|k| k.code()).collect();
    let states: Vec<&str> = honker::JobState::ALL.iter().map(|s| s.as_str()).collect();
    println!(
        "{}",
        serde_json::json!({ "error_codes": codes, "job_states": states })
    );
}
