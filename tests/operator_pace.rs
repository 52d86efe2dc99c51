//! Issue 22: what leasectl says must be true at a person's pace, with pauses longer than
//! every interval an owner or the console polls at (the lease watch looks every 250 ms).

mod common;

use std::time::Duration;

use common::process::Home;

/// Longer than any poll interval of an owner (250 ms) or the console (1 s tick).
const PACE: Duration = Duration::from_millis(1500);

/// `hold` follows its own writer's entry: the same writer (same pid, start time and live
/// id) re-acquiring the session replaces the entry under a new id, which is not a lost
/// lease; `hold` keeps running and, on SIGTERM, releases the entry its writer holds now.
#[test]
fn hold_follows_its_writers_reacquired_entry_and_releases_it() {
    let home = Home::new();
    let mut hold = home.spawn("hold RE1", &["hold", "RE1", "--live-id", "tab-1", "--json"]);
    let grant = hold.json_line();
    let first = grant["lease_id"].as_str().expect("lease id").to_owned();
    let pid = hold.pid().to_string();
    let again = home.run(&["acquire", "RE1", "--owner-pid", &pid, "--live-id", "tab-1", "--json"]);
    again.expect_exit(0);
    assert_eq!(again.json()["replaced"], first.as_str(), "{again:?}");
    let second = again.json()["lease_id"].as_str().expect("lease id").to_owned();
    std::thread::sleep(PACE);
    assert!(hold.running(), "hold must not take its own writer's re-acquire for a lost lease");
    hold.signal(libc::SIGTERM);
    let status = hold.wait();
    assert_eq!(status.code(), Some(0), "hold ends as on any stop, not with 6 (lease lost)");
    let left: Vec<String> =
        home.entries().into_iter().filter_map(|e| e["lease_id"].as_str().map(str::to_owned)).collect();
    assert!(!left.contains(&second) && left.is_empty(), "hold released its writer's entry: {left:?}");
}
