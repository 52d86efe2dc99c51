//! `--wait` on etcd is a line in arrival order (as `etcdctl lock` serves), and whoever
//! waits in it is seen: `ls`, `metrics`.

use super::*;

/// `run SESSION --wait 120 -q -- sh -c 'echo NAME >> ORDER; sleep 0.1'`, started now.
fn waiter(endpoint: &str, prefix: &str, session: &str, name: &str, order: &std::path::Path, max: &[&str]) -> Reaped {
    let script = format!("echo {name} >> '{}'; sleep 0.1", order.display());
    let mut args = vec!["run", session, "--wait", "120", "-q"];
    args.extend_from_slice(max);
    args.extend_from_slice(&["--", "sh", "-c", &script]);
    Reaped(leasectl(endpoint, prefix, &args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn"))
}

/// `pid` when it is one of `started`, else its parent (from /proc/PID/stat).
fn parent_or_self(pid: u64, started: &[Reaped]) -> u64 {
    if started.iter().any(|w| u64::from(w.id()) == pid) {
        return pid;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    after_name.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0)
}

fn waiting(endpoint: &str, prefix: &str) -> Vec<Value> {
    let ls = json_of(&run(endpoint, prefix, &["ls", "--json"]));
    ls["waiting"].as_array().cloned().unwrap_or_default()
}

fn finish(waiters: Vec<Reaped>) {
    for mut w in waiters {
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = w.0.try_wait().expect("try_wait") {
                break s;
            }
            assert!(Instant::now() < deadline, "a waiter did not finish within 60 s");
            thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        if let Some(mut e) = w.0.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        assert!(status.success(), "a waiter failed ({status}): {err}");
    }
}

fn served(order: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(order).unwrap_or_default().lines().map(str::to_owned).collect()
}

#[test]
fn ten_waiters_for_one_session_are_served_in_arrival_order_and_seen_waiting() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("queue");
    let dir = tempfile::tempdir().expect("tempdir");
    let order = dir.path().join("order");
    let (mut holder, _) = start_holding(&endpoint, &prefix, &["hold", "Q", "--json"]);
    let mut waiters = Vec::new();
    for i in 0..10 {
        waiters.push(waiter(&endpoint, &prefix, "Q", &i.to_string(), &order, &[]));
        // Each is in line before the next arrives (arrival order is what is tested).
        assert!(
            eventually(Duration::from_secs(10), || waiting(&endpoint, &prefix).len() == i + 1),
            "waiter {i} is not seen waiting: {:?}",
            waiting(&endpoint, &prefix)
        );
        thread::sleep(Duration::from_millis(300));
    }
    // Who waits, for what, since when, in the order they are served.
    let line = waiting(&endpoint, &prefix);
    // `run`'s lease is owned by its keeper, a child of the process started.
    let pids: Vec<u64> = line.iter().filter_map(|w| w["pid"].as_u64()).map(|p| parent_or_self(p, &waiters)).collect();
    let expected: Vec<u64> = waiters.iter().map(|w| u64::from(w.id())).collect();
    assert_eq!(pids, expected, "{line:?}");
    assert!(line.iter().all(|w| w["session_id"] == "Q" && w["host"].as_str().is_some_and(|h| !h.is_empty())));
    let since: Vec<f64> = line.iter().filter_map(|w| w["since"].as_f64()).collect();
    assert!(since.len() == 10 && since.windows(2).all(|p| p[0] <= p[1]), "{line:?}");
    let text = String::from_utf8_lossy(&run(&endpoint, &prefix, &["ls"]).stdout).into_owned();
    let first = line[0]["pid"].as_u64().unwrap_or(0);
    assert!(text.contains("10 waiting") && text.contains(&format!("1. session Q: pid {first} ")), "{text}");
    let metrics = String::from_utf8_lossy(&run(&endpoint, &prefix, &["metrics"]).stdout).into_owned();
    assert!(metrics.lines().any(|l| l.starts_with("leasectl_waiters{") && l.ends_with(" 10")), "{metrics}");

    holder.signal(libc::SIGTERM);
    let (code, err, _) = holder.wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
    finish(waiters);
    let names: Vec<String> = (0..10).map(|i| i.to_string()).collect();
    assert_eq!(served(&order), names, "served in arrival order");
    assert!(waiting(&endpoint, &prefix).is_empty(), "nobody is left in line");
}

#[test]
fn waiters_for_a_full_cap_take_the_freed_slots_in_arrival_order() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("queue-cap");
    let dir = tempfile::tempdir().expect("tempdir");
    let order = dir.path().join("order");
    let (mut holder, _) = start_holding(&endpoint, &prefix, &["hold", "FULL", "--max", "1", "--json"]);
    let mut waiters = Vec::new();
    for i in 0..5 {
        waiters.push(waiter(&endpoint, &prefix, &format!("C{i}"), &format!("C{i}"), &order, &["--max", "1"]));
        assert!(
            eventually(Duration::from_secs(10), || waiting(&endpoint, &prefix).len() == i + 1),
            "waiter {i} is not seen waiting"
        );
        thread::sleep(Duration::from_millis(300));
    }
    // A newcomer that does not wait does not jump the line when the slot frees.
    holder.signal(libc::SIGTERM);
    let (code, err, _) = holder.wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
    finish(waiters);
    let names: Vec<String> = (0..5).map(|i| format!("C{i}")).collect();
    assert_eq!(served(&order), names, "served in arrival order");
}
