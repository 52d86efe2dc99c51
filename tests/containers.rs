//! Owners in containers: a process in another pid namespace records the pid it has
//! there (`"pid": 1`), which the host knows by another. Seen from the host it is alive
//! (by `NSpid` and its start time), kept, counted and stoppable; a registry shared across
//! pid namespaces is a hazard doctor names; a leasectl inside a container says what it
//! cannot see. Real processes in real pid namespaces (`unshare --pid --fork --mount-proc`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::Reaped;
use crate::common::process::{BIN, Home, Proc, Sleeper, leasectl, str_of, wait_for};

/// The tests that make pid namespaces take turns: every namespace has a pid 1, and two
/// started in one clock tick (10 ms) by tests running side by side cannot be told apart
/// by anyone (that case is the unit test's `Found::Several`; here each test's own).
pub(crate) static NAMESPACES: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    NAMESPACES.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A command run as the first process of a new pid namespace (with its own /proc). Ended
/// on drop by SIGKILL from here: a namespace's init ignores unshare's death signal.
struct InNamespace {
    unshare: Reaped,
}

impl Drop for InNamespace {
    fn drop(&mut self) {
        if let Some(init) = self.init() {
            let _ = crate::common::signals::kill(init as u32, libc::SIGKILL);
        }
    }
}

impl InNamespace {
    fn start(args: &[&str]) -> InNamespace {
        let child = Command::new("unshare")
            .args(["--pid", "--mount-proc", "--fork"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unshare (util-linux)");
        InNamespace { unshare: Reaped(child) }
    }

    /// The namespace's first process, by the pid this host knows it by.
    fn host_pid(&self) -> u64 {
        wait_for("unshare's child", || self.init())
    }

    fn init(&self) -> Option<u64> {
        let unshare = self.unshare.id();
        let children = std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    }
}

/// `leasectl hold SESSION` as pid 1 of its own pid namespace, once its lease is written.
fn hold_in_namespace(home: &Path, session: &str) -> InNamespace {
    let held = InNamespace::start(&[BIN, "--home", &home.display().to_string(), "hold", session]);
    wait_for("the namespaced hold's lease", || {
        let bytes = std::fs::read(home.join("runtime/active_sessions.json")).ok()?;
        let entries = crate::common::process::entries_of(&bytes);
        entries.iter().any(|e| e["session_id"] == session && e["pid"] == 1).then_some(())
    });
    held
}

fn ls_json(home: &Path) -> Vec<Value> {
    let out = Proc::run("ls --json", leasectl(home, &["ls", "--json"]));
    out.expect_exit(0);
    out.json()["registries"][0]["leases"].as_array().cloned().unwrap_or_default()
}

fn lease_of<'a>(leases: &'a [Value], session: &str) -> &'a Value {
    leases.iter().find(|l| l["entry"]["session_id"] == session).unwrap_or_else(|| panic!("no {session}: {leases:?}"))
}

fn sessions(home: &Home) -> Vec<String> {
    home.entries().iter().map(|e| str_of(e, "session_id").to_owned()).collect()
}

/// From the host, the owner that recorded pid 1 in its namespace is alive: listed with
/// both pids, its session refused to another, counted toward the cap, kept by prune, and
/// `stop` ends it through the pid this host knows (its own release frees the session).
#[test]
#[ignore = "needs root: makes pid namespaces with unshare (.ci/run runs it)"]
fn an_owner_in_another_pid_namespace_is_alive_kept_and_stopped_from_the_host() {
    let _turn = one_at_a_time();
    let home = Home::new();
    std::fs::write(home.path().join("config.yaml"), "max_concurrent_sessions: 1\n").expect("config.yaml");
    let held = hold_in_namespace(home.path(), "S1");
    let host_pid = held.host_pid();

    let leases = ls_json(home.path());
    let lease = lease_of(&leases, "S1");
    assert_eq!(lease["liveness"], "alive", "{lease}");
    assert_eq!(lease["entry"]["pid"], 1, "the registry keeps the pid as recorded: {lease}");
    assert_eq!(lease["namespaced_owner"]["host_pid"], host_pid, "{lease}");
    assert_eq!(lease["namespaced_owner"]["recorded_pid"], 1, "{lease}");
    assert_eq!(lease["owner"]["name"], "leasectl", "the owner named by its pid here: {lease}");
    let text = Proc::run("ls", leasectl(home.path(), &["ls"])).text();
    assert!(text.contains(&format!("1 (host {host_pid})")), "{text}");
    let metrics = Proc::run("metrics", leasectl(home.path(), &["metrics"])).text();
    assert!(metrics.contains("leasectl_live_leases{profile=\"root\"} 1"), "counted live: {metrics}");

    // The fence: its session is refused, and it fills the one slot.
    let other = Sleeper::new();
    let out = Proc::run("acquire S1", leasectl(home.path(), &["acquire", "S1", "--owner-pid", &other.pid_arg()]));
    out.expect_exit(3);
    assert!(out.stderr.contains(&format!("pid {host_pid} on this host")), "{out:?}");
    let out = Proc::run("acquire S2", leasectl(home.path(), &["acquire", "S2", "--owner-pid", &other.pid_arg()]));
    out.expect_exit(4);
    // prune and doctor --repair's judge keep it; doctor finds nothing stale.
    Proc::run("prune", leasectl(home.path(), &["prune", "--json"])).expect_exit(0);
    assert_eq!(sessions(&home), ["S1"]);
    let out = Proc::run("doctor --json", leasectl(home.path(), &["doctor", "--json"]));
    out.expect_exit(0);
    assert_eq!(out.json()["registries"][0]["stale"], serde_json::json!([]), "{out:?}");

    // stop: planned and ended by the pid this host knows, through its pidfd.
    let dry = Proc::run("stop --dry-run", leasectl(home.path(), &["stop", "--session", "S1", "--dry-run"]));
    dry.expect_exit(0);
    assert!(dry.stdout.contains(&format!("pid {host_pid} (pid 1 in its pid namespace)")), "{dry:?}");
    let out = Proc::run("stop", leasectl(home.path(), &["stop", "--session", "S1", "--yes", "--json"]));
    out.expect_exit(0);
    let v = out.json();
    assert_eq!(v["owners"][0]["pid"], host_pid, "{v}");
    assert_eq!(v["owners"][0]["ending"], "terminated", "{v}");
    assert_eq!(v["owners"][0]["leases"][0]["how"], "released", "its own release: {v}");
    assert!(sessions(&home).is_empty(), "the session is free");
    drop(held);
}

/// Several containers each have a pid 1: each lease is matched to its own by start time.
/// Two that started in the same clock tick cannot be told apart: unknown, kept.
#[test]
#[ignore = "needs root: makes pid namespaces with unshare (.ci/run runs it)"]
fn pid_ones_of_several_namespaces_are_told_apart_by_their_start_times() {
    let _turn = one_at_a_time();
    let home = Home::new();
    let first = hold_in_namespace(home.path(), "A");
    // Another clock tick: the pid 1s' start times differ (the tie is the unit test's).
    std::thread::sleep(Duration::from_millis(30));
    let second = hold_in_namespace(home.path(), "B");
    let (pid_a, pid_b) = (first.host_pid(), second.host_pid());
    let start = |pid: u64| leasectl::lease::owners::liveness::process_start_time(pid).expect("a start time");
    let leases = ls_json(home.path());
    if (start(pid_a) - start(pid_b)).abs() < 0.001 {
        for s in ["A", "B"] {
            assert_eq!(lease_of(&leases, s)["liveness"], "unknown", "one tick, two pid 1s: {leases:?}");
        }
    } else {
        assert_eq!(lease_of(&leases, "A")["namespaced_owner"]["host_pid"], pid_a, "{leases:?}");
        assert_eq!(lease_of(&leases, "B")["namespaced_owner"]["host_pid"], pid_b, "{leases:?}");
    }
    Proc::run("prune", leasectl(home.path(), &["prune"])).expect_exit(0);
    assert_eq!(sessions(&home), ["A", "B"], "neither is pruned");
    // The one that is gone is judged as before: its pid 1 is this host's init, recycled.
    drop(first);
    let leases = wait_for("A's owner gone", || {
        let leases = ls_json(home.path());
        (lease_of(&leases, "A")["liveness"] != "alive").then_some(leases)
    });
    assert_eq!(lease_of(&leases, "A")["liveness"], "recycled", "{leases:?}");
    assert_ne!(lease_of(&leases, "B")["liveness"], "recycled", "{leases:?}");
    drop(second);
}

/// A home whose live owners run in two pid namespaces (a container's and the host's):
/// doctor names the hazard and fails, and says what to do.
#[test]
#[ignore = "needs root: makes pid namespaces with unshare (.ci/run runs it)"]
fn doctor_names_a_registry_shared_across_pid_namespaces() {
    let _turn = one_at_a_time();
    let home = Home::new();
    let held = hold_in_namespace(home.path(), "IN");
    let out = Proc::run("doctor", leasectl(home.path(), &["doctor"]));
    out.expect_exit(0);
    let host = Sleeper::new();
    Proc::run("acquire", leasectl(home.path(), &["acquire", "OUT", "--owner-pid", &host.pid_arg()])).expect_exit(0);
    let out = Proc::run("doctor", leasectl(home.path(), &["doctor"]));
    out.expect_exit(1);
    let text = out.text();
    assert!(text.contains("live owners in 2 pid namespaces share this registry"), "{text}");
    assert!(text.contains("this host's pid namespace (1 lease)"), "{text}");
    assert!(text.contains("drops their leases on its next write") && text.contains("--pid=host"), "{text}");
    assert!(text.contains("1 registry shared across pid namespaces"), "{text}");
    let out = Proc::run("doctor --json", leasectl(home.path(), &["doctor", "--json"]));
    assert_eq!(out.json()["registries"][0]["pid_namespaces"].as_array().map(Vec::len), Some(2), "{out:?}");
    drop(held);
}

/// leasectl run inside a pid namespace, with an owner on the host: says once what it
/// cannot see and where to run instead; an owner that started before the namespace did
/// is unknown (kept, its session refused), never pruned from inside.
#[test]
#[ignore = "needs root: makes pid namespaces with unshare (.ci/run runs it)"]
fn leasectl_inside_a_pid_namespace_says_what_it_cannot_see_and_keeps_an_older_owner() {
    let _turn = one_at_a_time();
    let home = Home::new();
    let host = Sleeper::new();
    Proc::run("acquire", leasectl(home.path(), &["acquire", "H", "--owner-pid", &host.pid_arg()])).expect_exit(0);
    // The namespace's first process starts well after the owner did (ticks are 10 ms).
    std::thread::sleep(Duration::from_millis(50));
    let inside = |args: &[&str]| {
        let mut cmd = Command::new("unshare");
        cmd.args(["--pid", "--fork", "--mount-proc", BIN, "--home"]).arg(home.path()).args(args);
        cmd.env_remove("HERMES_HOME").stdin(Stdio::null());
        Proc::run(&format!("{args:?} inside a pid namespace"), cmd)
    };
    let out = inside(&["ls", "--json"]);
    out.expect_exit(0);
    assert!(out.stderr.contains("runs in a pid namespace that is not the host's"), "{out:?}");
    assert!(out.stderr.contains(&format!("leasectl --home {} ls", home.path().display())), "{out:?}");
    let lease = out.json()["registries"][0]["leases"][0].clone();
    assert_eq!(lease["liveness"], "unknown", "{lease}");
    assert!(str_of(&lease, "liveness_detail").contains("before this pid namespace's first process"), "{lease}");
    // Whatever runs at that pid in here is not named as its owner.
    assert!(lease["owner"].is_null(), "{lease}");
    inside(&["prune"]).expect_exit(0);
    assert_eq!(sessions(&home), ["H"], "not pruned from inside");
    // As the namespace's first process it has no parent there: no default owner, said so.
    let out = inside(&["acquire", "X"]);
    out.expect_exit(1);
    assert!(
        out.stderr.contains("parent runs outside its pid namespace") && out.stderr.contains("--owner-pid"),
        "{out:?}"
    );
    let out = inside(&["acquire", "H", "--owner-pid", "1"]);
    out.expect_exit(3);
    let out = inside(&["doctor"]);
    assert!(out.stderr.contains("runs in a pid namespace that is not the host's"), "{out:?}");

    // A host owner that started after the namespace did and is gone looks dead from
    // inside, as from anywhere: prune removes it, and says it may have run outside.
    let ns = InNamespace::start(&["sleep", "30"]);
    ns.host_pid();
    std::thread::sleep(Duration::from_millis(50));
    let mut late = Sleeper::new();
    Proc::run("acquire L", leasectl(home.path(), &["acquire", "L", "--owner-pid", &late.pid_arg()])).expect_exit(0);
    late.kill();
    let init = ns.host_pid().to_string();
    let mut cmd = Command::new("nsenter");
    cmd.args(["--target", &init, "--pid", "--mount", BIN, "--home"]).arg(home.path()).args(["prune", "--dry-run"]);
    let out = Proc::run("prune --dry-run inside", cmd);
    out.expect_exit(0);
    assert!(out.stdout.contains("prune would remove 1 lease"), "{out:?}");
    assert!(out.stdout.contains("may run outside it") && out.stdout.contains("session L"), "{out:?}");
    drop(ns);
}

/// From the host, nothing is looked up where every owner matches: no process of another
/// namespace is read, so a host without containers pays nothing. Seen by strace: no
/// `ns/pid` link of another process is read by an `ls` of live host owners.
#[test]
fn a_host_whose_owners_all_match_reads_no_other_namespace() {
    if Command::new("strace").arg("-V").stdout(Stdio::null()).status().is_err() {
        panic!("strace is needed (.ci/run installs it)");
    }
    let home = Home::new();
    let owner = Sleeper::new();
    Proc::run("acquire", leasectl(home.path(), &["acquire", "S", "--owner-pid", &owner.pid_arg()])).expect_exit(0);
    let traced = |home: &Path| {
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-e", "trace=readlink,readlinkat", "-o", "/dev/stderr", BIN, "--home"]).arg(home).arg("ls");
        Proc::run("strace ls", cmd)
    };
    let out = traced(home.path());
    out.expect_exit(0);
    let reads = out.stderr.lines().filter(|l| l.contains("/ns/pid") && !l.contains("/proc/self/")).count();
    assert_eq!(reads, 0, "{}", out.stderr);
    // With a dead owner, /proc is read once: each process's ns link (and none twice).
    let mut gone = Sleeper::new();
    Proc::run("acquire", leasectl(home.path(), &["acquire", "D", "--owner-pid", &gone.pid_arg()])).expect_exit(0);
    let mut gone2 = Sleeper::new();
    Proc::run("acquire", leasectl(home.path(), &["acquire", "E", "--owner-pid", &gone2.pid_arg()])).expect_exit(0);
    gone.kill();
    gone2.kill();
    let out = traced(home.path());
    let links: Vec<&str> = out.stderr.lines().filter(|l| l.contains("/ns/pid") && !l.contains("/proc/self/")).collect();
    assert!(!links.is_empty(), "{}", out.stderr);
    let mut distinct = links.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), links.len(), "each process looked at once for two dead owners");
}

/// A hardened service's /proc (systemd's `ProtectProc=invisible` with `ProcSubset=pid`:
/// `hidepid=invisible,subset=pid`, no /proc/stat): leasectl run there as the service's
/// user judges its own owners, keeps another user's as hidden, and fences.
#[test]
#[ignore = "needs root: mounts /proc hidepid=invisible,subset=pid in a mount namespace and runs leasectl as uid 65534 (.ci/run runs it)"]
fn a_hardened_services_proc_without_proc_stat_still_judges_and_fences() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    std::fs::set_permissions(home.outside(), std::fs::Permissions::from_mode(0o755)).expect("chmod the temp dir");
    let roots = Sleeper::new();
    Proc::run("acquire ROOT", leasectl(home.path(), &["acquire", "ROOT", "--owner-pid", &roots.pid_arg()]))
        .expect_exit(0);
    let status = Command::new("chown").args(["-R", "65534:65534"]).arg(home.path()).status().expect("chown");
    assert!(status.success());
    // As uid 65534 behind that /proc: its own owner (a sleep it starts) and root's.
    let script = "mount -t proc -o hidepid=invisible,subset=pid proc /proc && test ! -e /proc/stat && \
                  exec setpriv --reuid=65534 --regid=65534 --clear-groups sh -c '\
                  sleep 30 & own=$!; \"$0\" --home \"$1\" acquire MINE --owner-pid $own --json && echo === && \
                  \"$0\" --home \"$1\" ls --json; kill $own' \"$0\" \"$1\"";
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c", script, BIN]).arg(home.path());
    cmd.env_remove("HERMES_HOME").stdin(Stdio::null());
    let out = Proc::run("acquire and ls behind hidepid=invisible,subset=pid", cmd);
    out.expect_exit(0);
    let listing: Value = out
        .stdout
        .split_once("===\n")
        .and_then(|(_, rest)| serde_json::from_str(rest).ok())
        .unwrap_or_else(|| panic!("a grant, then a listing: {out:?}"));
    let leases = listing["registries"][0]["leases"].as_array().cloned().unwrap_or_default();
    assert_eq!(lease_of(&leases, "ROOT")["liveness"], "hidden", "{leases:?}");
    assert_eq!(lease_of(&leases, "MINE")["liveness"], "alive", "{leases:?}");
    assert!(lease_of(&leases, "MINE")["entry"]["process_start_time"].is_f64(), "a start time recorded: {leases:?}");
}

/// A `hold` inside a container releases its own lease alone: a live host owner's lease
/// beside it, which looks dead from inside, is not pruned with it (Hermes' release drops
/// it: the hazard `doctor` names).
#[test]
#[ignore = "needs root: makes pid namespaces with unshare (.ci/run runs it)"]
fn a_release_inside_a_pid_namespace_removes_its_own_lease_alone() {
    let _turn = one_at_a_time();
    let home = Home::new();
    let held = hold_in_namespace(home.path(), "IN");
    let host = Sleeper::new();
    Proc::run("acquire", leasectl(home.path(), &["acquire", "OUT", "--owner-pid", &host.pid_arg()])).expect_exit(0);
    let out = Proc::run("stop", leasectl(home.path(), &["stop", "--session", "IN", "--yes", "--json"]));
    out.expect_exit(0);
    assert_eq!(out.json()["owners"][0]["leases"][0]["how"], "released", "{out:?}");
    assert_eq!(sessions(&home), ["OUT"], "the host owner's lease outlives the release inside");
    drop(held);
}

/// The cgroup v2 hierarchy (`cgroup2` in /proc/self/mounts): where a test makes a cgroup
/// named as a container runtime names its containers.
fn cgroup2_root() -> std::path::PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("/proc/self/mounts");
    let at = mounts.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        (fields.get(2) == Some(&"cgroup2")).then(|| fields[1].to_owned())
    });
    std::path::PathBuf::from(at.expect("a cgroup2 hierarchy is mounted"))
}

/// The container an owner runs in is named from its cgroup, as the kernel shows it: the
/// namespaced owner moved into a cgroup laid out as docker's (`/docker/<64 hex>`).
#[test]
#[ignore = "needs root: makes pid namespaces and a cgroup (.ci/run runs it)"]
fn the_container_an_owner_runs_in_is_named_from_its_cgroup() {
    let _turn = one_at_a_time();
    let home = Home::new();
    let held = hold_in_namespace(home.path(), "S1");
    let id = format!("{:064x}", u128::from(std::process::id()) << 64 | u128::from(held.host_pid()));
    let cgroup = cgroup2_root().join("docker").join(&id);
    std::fs::create_dir_all(&cgroup).expect("a cgroup");
    std::fs::write(cgroup.join("cgroup.procs"), held.host_pid().to_string()).expect("move the owner into it");
    let leases = ls_json(home.path());
    let container = &lease_of(&leases, "S1")["namespaced_owner"]["container"];
    assert_eq!(container["runtime"], "docker", "{leases:?}");
    assert_eq!(container["id"], &id[..12], "{leases:?}");
    let wide = Proc::run("ls -o wide", leasectl(home.path(), &["ls", "-o", "wide"])).text();
    assert!(wide.contains(&format!("alive, in docker {}", &id[..12])), "{wide}");
    drop(held);
    // Empty once its process is gone: then it can be removed.
    wait_for("the cgroup emptied and removed", || std::fs::remove_dir(&cgroup).ok());
    let _ = std::fs::remove_dir(cgroup2_root().join("docker"));
}

/// `doctor --repair` drops an invalid entry only where its owner is proven dead: an
/// entry of a live owner in a container (its surface not a string) needs `--force`, as
/// any live owner's does, and the plan says its owner is alive in another pid namespace.
#[test]
#[ignore = "needs root: makes pid namespaces with unshare (.ci/run runs it)"]
fn repair_keeps_an_invalid_entry_of_a_live_owner_in_a_container_unless_forced() {
    let _turn = one_at_a_time();
    let home = Home::new();
    let held = hold_in_namespace(home.path(), "S1");
    let mut entries = home.entries();
    entries[0]["surface"] = serde_json::json!(7);
    home.write_registry(serde_json::json!({"entries": entries}).to_string());
    let out = Proc::run("repair", leasectl(home.path(), &["doctor", "--repair", "--yes", "--json"]));
    assert_ne!(out.status.code(), Some(0), "refused without --force: {out:?}");
    assert_eq!(home.entries().len(), 1, "nothing dropped: {out:?}");
    // Without a terminal or --yes: the plan, and nothing changed.
    let plan = Proc::run("repair's plan", leasectl(home.path(), &["doctor", "--repair"]));
    let text = plan.text();
    assert!(text.contains("NEEDS --force") && text.contains("alive in another pid namespace"), "{text}");
    drop(held);
}
