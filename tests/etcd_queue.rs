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

/// Every key of etcd's `ls --json` (its top, a lease, a waiter) is named in docs/commands.md's
/// JSON bullet for it, and every name there is a key.
fn readme_names_every_key(ls: &Value) {
    let readme = std::fs::read_to_string("docs/commands.md").expect("docs/commands.md");
    let bullet = readme.lines().find(|l| l.starts_with("- `--backend etcd ls --json`")).expect("the JSON bullet");
    let named: std::collections::BTreeSet<&str> = bullet.split('"').skip(1).step_by(2).collect();
    let keys = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<String>>()).unwrap_or_default();
    let mut have = keys(ls);
    have.extend(keys(&ls["leases"][0]));
    have.extend(keys(&ls["waiting"][0]));
    have.extend(keys(&ls["slots_used"][0]));
    let unnamed: Vec<&String> = have.iter().filter(|k| !named.contains(k.as_str())).collect();
    assert!(unnamed.is_empty(), "keys docs/commands.md does not name: {unnamed:?} in {ls}");
    let missing: Vec<&&str> = named.iter().filter(|n| !have.iter().any(|k| k == *n) && **n != "etcd").collect();
    assert!(missing.is_empty(), "names the README gives that the output lacks: {missing:?} in {ls}");
}

/// A `hold` ended as an operator ends it (SIGTERM): it releases and exits 0.
fn release(holder: &mut Proc) {
    holder.signal(libc::SIGTERM);
    let (code, err, _) = holder.wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
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

    release(&mut holder);
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
    readme_names_every_key(&json_of(&run(&endpoint, &prefix, &["ls", "--json"])));
    release(&mut holder);
    finish(waiters);
    let names: Vec<String> = (0..5).map(|i| format!("C{i}")).collect();
    assert_eq!(served(&order), names, "served in arrival order");
}

/// The console's slots are the slot keys under the prefix's cap: a capped lease gone
/// leaves `0/4`, leases taken without --max hold no slot (`slots 4/4 FULL` was shown
/// while `acquire --max 4` succeeded), the cap changes once in 5 runs (it flapped
/// `none -> 4`, `4 -> none` twice a run), and who waits in line is on screen.
#[test]
fn the_console_counts_slot_keys_keeps_the_cap_and_shows_who_waits() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("console-slots");
    let mut follower = Reaped(
        leasectl(&endpoint, &prefix, &["events", "--follow", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the follower"),
    );
    let (mut console, _cwd) = console_on(&endpoint, &prefix, 30, 120);
    console.wait_for("the empty etcd table", Duration::from_secs(10), |s| s.contains("no leases held"));
    let me = me();
    for i in 0..5 {
        let out = run(&endpoint, &prefix, &["run", &format!("R{i}"), "--max", "4", "-q", "--", "true"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        if i == 0 {
            console.wait_for("the cap set by the first run", Duration::from_secs(5), |s| {
                s.contains("cap-changed: none -> 4")
            });
        }
    }
    console.wait_for("the cap kept with no slot used", Duration::from_secs(5), |s| s.contains("slots 0/4"));
    // Four leases taken without --max hold no slot: the cap's slots are all free.
    for i in 0..4 {
        let out = run(&endpoint, &prefix, &["acquire", &format!("U{i}"), "--owner-pid", &me, "--ttl", "60"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    console.wait_for("four leases beside the cap", Duration::from_secs(5), |s| {
        s.contains("slots 0/4 +4 no cap") && s.contains("U3")
    });
    let capped = run(&endpoint, &prefix, &["acquire", "C0", "--owner-pid", &me, "--max", "4", "--ttl", "60"]);
    assert!(capped.status.success(), "{}", String::from_utf8_lossy(&capped.stderr));
    console.wait_for("one slot used", Duration::from_secs(5), |s| s.contains("slots 1/4 +4 no cap"));

    // Someone waits for a held session: counted in the header, named in the log.
    let mut waiter = Reaped(
        leasectl(&endpoint, &prefix, &["run", "C0", "--wait", "60", "-q", "--", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the waiter"),
    );
    console.wait_for("the waiter", Duration::from_secs(5), |s| {
        s.contains("1 waiting (first: C0 pid") && s.contains("waiting: session C0 (pid")
    });
    let _ = waiter.0.kill();
    let _ = waiter.0.wait();
    console.wait_for("the waiter gone", Duration::from_secs(15), |s| {
        !s.contains("1 waiting") && s.contains("left the line: session C0")
    });
    // One that is served is said so: its session freed, it takes it from the line.
    let mut served = Reaped(
        leasectl(&endpoint, &prefix, &["run", "C0", "--max", "4", "--wait", "60", "-q", "--", "sleep", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the waiter"),
    );
    console.wait_for("the second waiter", Duration::from_secs(5), |s| s.contains("1 waiting (first: C0 pid"));
    let freed = run(&endpoint, &prefix, &["force-release", "--session", "C0", "--live"]);
    assert!(freed.status.success(), "{}", String::from_utf8_lossy(&freed.stderr));
    console.wait_for("the waiter served", Duration::from_secs(5), |s| s.contains("served from the line: session C0"));
    let _ = served.0.wait();
    // Everything the console ever wrote: the cap was never lost.
    assert!(!console.wrote(b"4 -> none"), "the cap never went back to none");
    console.quit_and_check_restored(Duration::from_secs(5), Duration::from_secs(2));

    let _ = common::signals::kill(follower.id(), libc::SIGTERM);
    let mut said = String::new();
    if let Some(mut out) = follower.0.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut out, &mut said);
    }
    let _ = follower.0.wait();
    let caps: Vec<&str> = said.lines().filter(|l| l.contains("cap-changed")).collect();
    assert!(caps.len() <= 1, "the follower's cap changed at most once (none -> 4): {caps:?}");
}

/// An acquire that does not wait does not jump the line: a session freed while someone
/// waits for it is theirs (the waiter is stopped here, so it cannot take it at once).
#[test]
fn a_newcomer_that_does_not_wait_yields_to_the_line() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("queue-newcomer");
    let dir = tempfile::tempdir().expect("tempdir");
    let order = dir.path().join("order");
    let (mut holder, _) = start_holding(&endpoint, &prefix, &["hold", "N", "--ttl", "30", "--json"]);
    let first = waiter(&endpoint, &prefix, "N", "waiter", &order, &["--ttl", "30"]);
    assert!(eventually(Duration::from_secs(10), || waiting(&endpoint, &prefix).len() == 1), "the waiter is in line");
    // The one waiting is `run`'s keeper, the pid in line.
    let keeper = waiting(&endpoint, &prefix)[0]["pid"].as_u64().and_then(|p| u32::try_from(p).ok()).expect("a pid");
    let _ = common::signals::kill(keeper, libc::SIGSTOP);
    release(&mut holder);
    let me = me();
    let newcomer = run(&endpoint, &prefix, &["acquire", "N", "--owner-pid", &me, "--json"]);
    let said = json_of(&newcomer);
    assert_eq!(said["reason"], "SESSION_NOT_OWNED", "{said}");
    let message = said["message"].as_str().unwrap_or_default();
    assert!(message.contains("is free, but 1 client waiting for it came first"), "{message}");
    let _ = common::signals::kill(keeper, libc::SIGCONT);
    finish(vec![first]);
    assert_eq!(served(&order).first().map(String::as_str), Some("waiter"), "the one in line was served");
}

/// A waiter whose --wait runs out leaves the line as it gives up, and one that dies on
/// this host holds nobody up while its key waits for its lease to run out.
#[test]
fn a_waiter_that_gives_up_or_dies_holds_nobody_up() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("queue-leave");
    let (mut holder, _) = start_holding(&endpoint, &prefix, &["hold", "L", "--ttl", "30", "--json"]);
    let impatient = run(&endpoint, &prefix, &["run", "L", "--wait", "1", "--ttl", "30", "-q", "--", "true"]);
    assert_eq!(impatient.status.code(), Some(3), "{}", String::from_utf8_lossy(&impatient.stderr));
    assert!(waiting(&endpoint, &prefix).is_empty(), "it left the line as it gave up");

    let dir = tempfile::tempdir().expect("tempdir");
    let doomed = waiter(&endpoint, &prefix, "L", "doomed", &dir.path().join("order"), &["--ttl", "30"]);
    assert!(eventually(Duration::from_secs(10), || waiting(&endpoint, &prefix).len() == 1), "in line");
    let keeper = waiting(&endpoint, &prefix)[0]["pid"].as_u64().and_then(|p| u32::try_from(p).ok()).expect("a pid");
    let _ = common::signals::kill(keeper, libc::SIGKILL);
    let _ = common::signals::kill(doomed.id(), libc::SIGKILL);
    release(&mut holder);
    // Its key lasts up to 30 s more, but its pid is gone here: the session is free now.
    assert_eq!(waiting(&endpoint, &prefix).len(), 1, "the dead waiter's key is still there");
    let me = me();
    let newcomer = run(&endpoint, &prefix, &["acquire", "L", "--owner-pid", &me, "--json"]);
    assert!(newcomer.status.success(), "{}", String::from_utf8_lossy(&newcomer.stdout));
}
