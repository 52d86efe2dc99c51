//! The console over `--host` in a real pseudo-terminal, against two sshd "hosts" the
//! test starts (issue 27): a change on a host shows, a host going down is bannered
//! while the other stays live, and it is reconnected when it comes back.

use std::ffi::OsStr;
use std::process::Command;
use std::time::Duration;

use crate::common;
use common::process::{BIN, Home, Sleeper};
use common::pty::Pty;
use common::sshd::{SlowProxy, Sshd};

fn acquire(home: &Home, session: &str, owner: &Sleeper) {
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home.path())
        .args(["acquire", session, "--owner-pid", &owner.pid_arg()])
        .env_remove("HERMES_HOME")
        .output()
        .expect("acquire");
    assert!(out.status.success(), "{out:?}");
}

/// The console over `specs` in a 120x30 pty, through `sshd` (its key, its host key only).
fn console(sshd: &Sshd, specs: &[&str], cwd: &std::path::Path) -> Pty {
    console_sized(sshd, specs, cwd, BIN, (30, 120))
}

/// The same with `remote` as the hosts' leasectl, in a `rows` x `cols` pty.
fn console_sized(sshd: &Sshd, specs: &[&str], cwd: &std::path::Path, remote: &str, (rows, cols): (u16, u16)) -> Pty {
    let ssh = sshd.ssh_command();
    let dir = sshd.dir();
    let mut args: Vec<&OsStr> = specs.iter().flat_map(|s| [OsStr::new("--host"), OsStr::new(*s)]).collect();
    args.push(OsStr::new("tui"));
    let env = [
        ("LEASECTL_SSH_COMMAND", OsStr::new(&ssh)),
        ("LEASECTL_REMOTE_COMMAND", OsStr::new(remote)),
        ("XDG_CONFIG_HOME", dir.as_os_str()),
        ("XDG_RUNTIME_DIR", dir.as_os_str()),
    ];
    Pty::spawn("console over --host", &args, &env, cwd, rows, cols)
}

/// Two hosts (two sshds), a lease on each, and the console over both.
struct TwoHosts {
    one: Sshd,
    two: Sshd,
    a: Home,
    b: Home,
    owner: Sleeper,
    pty: Pty,
}

fn two_hosts() -> TwoHosts {
    let one = Sshd::start();
    let two = one.another();
    let (a, b) = (Home::new(), Home::new());
    let owner = Sleeper::new();
    acquire(&a, "S-on-gw1", &owner);
    acquire(&b, "S-on-gw2", &owner);
    let (h1, h2) = (one.spec("gw1", a.path()), two.spec("gw2", b.path()));
    let pty = console(&one, &[&h1, &h2], a.path());
    TwoHosts { one, two, a, b, owner, pty }
}

/// Now, in epoch seconds.
fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

#[test]
fn the_console_shows_hosts_and_rides_out_one_going_down() {
    let TwoHosts { one: _one, mut two, a, b, owner, mut pty } = two_hosts();
    pty.wait_for("both hosts' tabs and gw1's lease", Duration::from_secs(10), |s| {
        s.contains("gw1:root") && s.contains("gw2:root") && s.contains("S-on-gw1")
    });
    // The "all" tab: every host's leases.
    pty.send(b"\t");
    std::thread::sleep(Duration::from_millis(300));
    pty.send(b"\t");
    pty.wait_for("the all tab with both hosts' leases", Duration::from_secs(5), |s| {
        s.contains("S-on-gw1") && s.contains("S-on-gw2")
    });
    // A change on a host is on screen.
    acquire(&a, "S-new-gw1", &owner);
    let took = pty.wait_for("the new lease on gw1", Duration::from_secs(5), |s| s.contains("S-new-gw1"));
    assert!(took < Duration::from_secs(2), "a change on a host took {took:?} to show");

    // gw2 goes down: bannered with why; gw1 stays live.
    two.stop();
    pty.wait_for("gw2 bannered unreachable", Duration::from_secs(10), |s| {
        s.contains("HOST UNREACHABLE") && s.contains("gw2:root")
    });
    acquire(&a, "S-while-down", &owner);
    pty.wait_for("gw1 still live while gw2 is down", Duration::from_secs(5), |s| s.contains("S-while-down"));
    assert!(pty.text().contains("S-on-gw2"), "gw2's last snapshot stays on screen, marked stale");

    // gw2 comes back: reconnected (the pause doubles from 1 s), the banner goes.
    std::thread::sleep(Duration::from_secs(2));
    two.restart();
    pty.wait_for("gw2 reconnected", Duration::from_secs(25), |s| !s.contains("HOST UNREACHABLE"));
    acquire(&b, "S-back-gw2", &owner);
    pty.wait_for("gw2 live again", Duration::from_secs(5), |s| s.contains("S-back-gw2"));
    pty.quit_and_check_restored(Duration::from_secs(3), Duration::from_secs(2));
}

/// A host behind a slow link is bannered HOST LAGGING with how late its answers are,
/// and the banner goes when the link is quick again.
#[test]
fn a_host_whose_answers_lag_is_said_to_lag() {
    use std::sync::atomic::Ordering;
    let sshd = Sshd::start();
    let proxy = SlowProxy::start(sshd.port);
    sshd.trust_port(proxy.port);
    let home = Home::new();
    let owner = Sleeper::new();
    acquire(&home, "S-far", &owner);
    let spec = format!("far=ssh://{}@127.0.0.1:{}{}", sshd.user, proxy.port, home.path().display());
    let mut pty = console(&sshd, &[&spec], home.path());
    pty.wait_for("the far host's lease", Duration::from_secs(10), |s| s.contains("S-far"));
    proxy.delay.store(800, Ordering::Relaxed);
    pty.wait_for("the lag bannered", Duration::from_secs(20), |s| s.contains("HOST LAGGING (far:root)"));
    assert!(pty.text().contains("S-far"), "what was read stays on screen");
    proxy.delay.store(0, Ordering::Relaxed);
    pty.wait_for("the banner gone once answers are quick", Duration::from_secs(20), |s| !s.contains("HOST LAGGING"));
    pty.quit_and_check_restored(Duration::from_secs(3), Duration::from_secs(2));
}

/// A session that ends in a remote home's state.db, with its registry untouched, makes
/// its live owner's lease a leak suspect on screen: the host sends its sessions' context
/// with its listing, and again when state.db changes.
#[test]
fn a_session_ending_on_another_host_shows_its_lease_as_a_leak_suspect() {
    let sshd = Sshd::start();
    let home = Home::new();
    let owner = Sleeper::new();
    acquire(&home, "S-chat", &owner);
    let now = now();
    let db = common::process::hermes_state_db(home.path());
    db.execute_batch("INSERT INTO sessions VALUES ('S-chat', 'cli', 'a remote chat', 0, NULL, NULL);")
        .expect("a session");
    db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('S-chat', 'user', '.', ?1)", [now])
        .expect("message");
    let spec = sshd.spec("gw1", home.path());
    let mut pty = console(&sshd, &[&spec], home.path());
    pty.wait_for("the remote session's title", Duration::from_secs(10), |s| s.contains("a remote chat"));
    assert!(!pty.text().contains("LEAK?"), "an active session is no leak suspect:\n{}", pty.text());
    std::thread::sleep(Duration::from_secs(2));
    db.execute("UPDATE sessions SET ended_at = ?1, end_reason = 'user_exit' WHERE id = 'S-chat'", [now])
        .expect("end the session");
    pty.wait_for("the leak suspect", Duration::from_secs(10), |s| s.contains("LEAK?"));
    pty.quit_and_check_restored(Duration::from_secs(3), Duration::from_secs(2));
}

/// The console over --host opens with what each host's recorder saw in the last day, read
/// there, above the live lines (↶), as it does with a local home's.
#[test]
fn the_console_opens_with_each_hosts_recorded_history() {
    use common::process::{Proc, wait_for};
    let sshd = Sshd::start();
    let home = Home::new();
    let recorder = Proc::spawn(
        "recorder",
        common::process::leasectl(home.path(), &["events", "--follow", "--record", "-o", "json"]),
    );
    let _ = recorder.line(); // following
    let mut owner = Sleeper::new();
    acquire(&home, "S-before", &owner);
    wait_for("the recorder's acquired line", || recorder.line().contains("S-before").then_some(()));
    owner.kill();
    drop(recorder);
    let h = sshd.spec("gw1", home.path());
    let mut pty = console(&sshd, &[&h], home.path());
    pty.wait_for("the host's lease", Duration::from_secs(10), |s| s.contains("S-before"));
    std::thread::sleep(Duration::from_secs(2));
    // The log's oldest lines: e focuses it, Home goes to its top.
    pty.send(b"e");
    std::thread::sleep(Duration::from_millis(500));
    pty.send(b"\x1b[H");
    pty.wait_for("gw1's recorded history above the live lines", Duration::from_secs(10), |s| {
        s.contains("gw1:root ↶ acquired session S-before") && s.contains("recorded before this console opened")
    });
    pty.quit_and_check_restored(Duration::from_secs(3), Duration::from_secs(3));
}

/// A host that is back is tried at once on `r` (it waited out its pause, which had
/// doubled to 8 s and more); the table names each lease's host (issue 39).
#[test]
fn r_tries_a_host_that_is_back_at_once() {
    let TwoHosts { one: _one, mut two, a: _a, b: _b, owner: _owner, mut pty } = two_hosts();
    pty.wait_for("both hosts", Duration::from_secs(10), |s| s.contains("gw1:root") && s.contains("gw2:root"));
    pty.send(b"\t");
    std::thread::sleep(Duration::from_secs(1));
    pty.send(b"\t");
    pty.wait_for("the all tab with a HOST column", Duration::from_secs(5), |s| {
        s.contains("S-on-gw1") && s.contains("S-on-gw2") && s.contains("HOST")
    });
    two.stop();
    pty.wait_for("gw2 bannered unreachable", Duration::from_secs(10), |s| s.contains("HOST UNREACHABLE"));
    // Down long enough for its pause to have doubled past 4 s (1, 2, 4, 8...).
    std::thread::sleep(Duration::from_secs(8));
    two.restart();
    std::thread::sleep(Duration::from_secs(1));
    pty.send(b"r");
    pty.wait_for("r said it tries gw2 now", Duration::from_secs(3), |s| s.contains("trying again now: gw2"));
    let took = pty.wait_for("gw2 back", Duration::from_secs(20), |s| !s.contains("HOST UNREACHABLE"));
    assert!(took < Duration::from_secs(4), "r reconnected after {took:?}: it waited for the pause");
    pty.quit_and_check_restored(Duration::from_secs(3), Duration::from_secs(2));
}

/// A host of another leasectl version (same protocol) is bannered at 80x24 with the
/// command that puts this build there; its leases are shown all the same.
#[test]
fn the_console_names_a_host_of_another_version_with_the_install_command() {
    let sshd = Sshd::start();
    let home = Home::new();
    let owner = Sleeper::new();
    acquire(&home, "S-on-old", &owner);
    let spec = sshd.spec("old", home.path());
    let mut pty = console_sized(&sshd, &[&spec], home.path(), &sshd.older_leasectl(), (24, 80));
    pty.wait_for("the banner naming the version and the lease", Duration::from_secs(10), |s| {
        s.contains("HOST RUNS leasectl 0.0.9") && s.contains("S-on-old")
    });
    let screen = pty.text();
    let said = format!("HOST RUNS leasectl 0.0.9 (old:root), this is {}: `leasectl --host", env!("CARGO_PKG_VERSION"));
    assert!(screen.contains(&said) && screen.contains(" install` puts this build"), "{screen}");
    pty.quit_and_check_restored(Duration::from_secs(5), Duration::from_secs(5));
}
