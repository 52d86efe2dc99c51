//! Core properties beyond the seed: fail closed, nothing lost, Hermes' bytes,
//! modes, temp files, liveness of zombies and threads, psutil's start time,
//! transfer, force-release and doctor. Real files, real processes, real flock.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use leasectl::lease::{
    self, AcquireRequest, Error, ForceOptions, Liveness, Reason, Registry, Rule, Target, file::registry as store,
    home::lock, owners::liveness::DeadCause,
};
use serde_json::{Map, Value};

const T: Duration = Duration::from_secs(10);

fn home() -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = Registry::new("root", dir.path().join("home"));
    std::fs::create_dir_all(reg.runtime_dir()).expect("mkdir runtime");
    (dir, reg)
}

fn me() -> u64 {
    u64::from(std::process::id())
}

fn req(session: &str, live: &str) -> AcquireRequest {
    let mut metadata = Map::new();
    metadata.insert("live_session_id".into(), Value::String(live.into()));
    AcquireRequest {
        session_id: session.into(),
        surface: Some("cli".into()),
        metadata,
        owner_pid: me(),
        cap: None,
        track_liveness: false,
        lock_timeout: T,
    }
}

fn write_raw(reg: &Registry, text: impl AsRef<[u8]>) {
    std::fs::write(reg.path(), text).expect("write registry");
}

fn read_raw(reg: &Registry) -> Vec<u8> {
    std::fs::read(reg.path()).expect("read registry")
}

/// One invalid registry per strict rule (spec §3), with the rule it breaks.
fn invalid_files() -> Vec<(&'static str, Vec<u8>, Rule)> {
    let ok = r#"{"lease_id": "a1", "session_id": "S", "pid": 1, "surface": "cli", "process_start_time": null}"#;
    let with = |k: &str, v: &str| {
        let mut e: Value = serde_json::from_str(ok).expect("json");
        e[k] = serde_json::from_str(v).expect("json value");
        format!("{{\"entries\": [{e}]}}")
    };
    let texts: Vec<(&'static str, String, Rule)> = vec![
        ("not json", "{\"entries\": [}".into(), Rule::NotJson),
        ("truncated", "{\"entries\": [{\"lease_id\": \"a".into(), Rule::NotJson),
        // Python reads NaN; the protocol then refuses a start time that is not finite.
        ("NaN", with("process_start_time", "1.0").replace("1.0", "NaN"), Rule::ProcessStartTime),
        ("over 4300 digits", with("x_big", &"9".repeat(4301)), Rule::NotJson),
        ("no entries", "{}".into(), Rule::WrongShape),
        ("entries not list", "{\"entries\": {}}".into(), Rule::WrongShape),
        ("scalar", "42".into(), Rule::WrongShape),
        ("non-object entry", "{\"entries\": [\"x\"]}".into(), Rule::NonObjectEntry),
        ("blank lease id", with("lease_id", "\"  \""), Rule::LeaseId),
        ("duplicate lease id", format!("{{\"entries\": [{ok}, {ok}]}}"), Rule::DuplicateLeaseId),
        ("empty session id", with("session_id", "\"\""), Rule::SessionId),
        ("session id number", with("session_id", "7"), Rule::SessionId),
        ("pid bool", with("pid", "true"), Rule::Pid),
        ("pid zero", with("pid", "0"), Rule::Pid),
        ("pid text", with("pid", "\"abc\""), Rule::Pid),
        ("surface number", with("surface", "3"), Rule::Surface),
        ("track_liveness string", with("track_liveness", "\"true\""), Rule::TrackLiveness),
        ("metadata list", with("metadata", "[1]"), Rule::Metadata),
        ("start time text", with("process_start_time", "\"later\""), Rule::ProcessStartTime),
        ("start time inf", with("process_start_time", "\"inf\""), Rule::ProcessStartTime),
    ];
    let mut out: Vec<(&'static str, Vec<u8>, Rule)> =
        texts.into_iter().map(|(n, t, r)| (n, t.into_bytes(), r)).collect();
    out.push(("not utf-8", b"{\"entries\": [\"\xff\"]}".to_vec(), Rule::Unreadable));
    out
}

#[test]
fn acquire_fails_closed_on_every_invalid_rule_and_leaves_the_file_untouched() {
    for (name, text, rule) in invalid_files() {
        let (_d, reg) = home();
        write_raw(&reg, &text);
        let before = read_raw(&reg);
        let refusal = lease::file::acquire(&reg, &req("S2", "t")).expect_err(name);
        assert_eq!(refusal.reason, Reason::SessionCoordinationUnavailable, "{name}");
        assert_eq!(read_raw(&reg), before, "{name}: file must be byte-identical");
        match store::read(&reg.path()) {
            Err(Error::Invalid(inv)) => assert_eq!(inv.problems[0].rule, rule, "{name}: {inv}"),
            other => panic!("{name}: expected invalid, got {other:?}"),
        }
        // Release, transfer and prune also refuse to touch it.
        assert!(lease::file::release(&reg, "a1", T).is_err(), "{name}");
        assert!(lease::file::prune(&reg, lease::PruneOptions::default(), T).is_err(), "{name}");
        assert_eq!(read_raw(&reg), before, "{name}: untouched by admin actions");
    }
}

#[test]
fn unknown_fields_survive_acquire_and_release() {
    let (_d, reg) = home();
    let theirs = format!(
        r#"{{"schema": {{"v": 2}}, "entries": [{{"lease_id": "k1", "session_id": "K", "pid": {}, "process_start_time": null, "started_at": 1.5, "surface": "gateway", "future": {{"z": [1, 2.50, "ü"], "a": null}}, "metadata": {{"live_session_id": "x", "extra": true}}}}]}}"#,
        me()
    );
    write_raw(&reg, &theirs);
    let g = lease::file::acquire(&reg, &req("S", "t")).expect("granted");
    lease::file::release(&reg, &g.lease_id, T).expect("released");
    let expected = format!(
        r#"{{"entries": [{{"future": {{"a": null, "z": [1, 2.5, "ü"]}}, "lease_id": "k1", "metadata": {{"extra": true, "live_session_id": "x"}}, "pid": {}, "process_start_time": null, "session_id": "K", "started_at": 1.5, "surface": "gateway"}}], "schema": {{"v": 2}}}}"#,
        me()
    );
    assert_eq!(String::from_utf8(read_raw(&reg)).expect("utf-8"), expected);
}

/// The owner's release judges the lease from the read its removal makes: a refusal
/// writes nothing (not even a prune), and what it judged is the lease it would remove.
#[test]
fn release_unless_judges_the_lease_it_removes_and_a_refusal_writes_nothing() {
    let (_d, reg) = home();
    let g = lease::file::acquire(&reg, &req("S", "t")).expect("granted");
    let dead = r#"{"lease_id": "dead", "pid": 2147483646, "process_start_time": 1.0, "session_id": "D"}"#;
    let raw = String::from_utf8(read_raw(&reg)).expect("utf-8");
    write_raw(&reg, raw.replacen("{\"entries\": [", &format!("{{\"entries\": [{dead}, "), 1));
    let before = read_raw(&reg);
    let seen = std::cell::RefCell::new(Vec::new());
    let refuse = |v: &lease::LeaseView| {
        seen.borrow_mut().push((v.entry.lease_id().to_owned(), v.liveness.clone()));
        true
    };
    let refused = lease::file::fence::release_unless(&reg, &g.lease_id, T, &refuse).expect("no error");
    assert!(matches!(refused, lease::OwnerRelease::Refused(ref v) if v.entry.lease_id() == g.lease_id), "{refused:?}");
    assert_eq!(seen.borrow().as_slice(), &[(g.lease_id.clone(), Liveness::Alive)]);
    assert_eq!(read_raw(&reg), before, "a refused release writes nothing, not even the dead owner's prune");
    // Let through: removed, the dead owner pruned on the way, and the judged lease returned.
    let done = lease::file::fence::release_unless(&reg, &g.lease_id, T, &|_| false).expect("released");
    let lease::OwnerRelease::Done { released, view } = done else { panic!("refused: {done:?}") };
    assert!(released.removed);
    assert_eq!(released.pruned.iter().map(|e| e.lease_id()).collect::<Vec<_>>(), ["dead"]);
    assert_eq!(view.map(|v| v.entry.lease_id().to_owned()), Some(g.lease_id.clone()));
    assert!(store::read(&reg.path()).expect("valid").entries.is_empty());
    // Already gone: nothing judged, nothing written.
    let again = lease::file::fence::release_unless(&reg, &g.lease_id, T, &refuse).expect("no error");
    assert!(matches!(again, lease::OwnerRelease::Done { ref released, view: None } if !released.removed));
    assert_eq!(seen.borrow().len(), 1);
}

#[test]
fn rewrite_is_byte_identical_to_hermes_format() {
    let (_d, reg) = home();
    // Pretty, unsorted, with a dead owner: prune rewrites it in Hermes' exact format.
    write_raw(
        &reg,
        format!(
            "{{\n  \"entries\": [\n    {{\"surface\": \"tui\", \"session_id\": \"S\", \"pid\": {},\n     \"lease_id\": \"0123456789abcdef0123456789abcdef\", \"process_start_time\": null,\n     \"started_at\": 1795989978.5677974, \"updated_at\": 1795989978.5677974,\n     \"metadata\": {{\"live_session_id\": \"tab-1\"}}}},\n    {{\"lease_id\": \"dead\", \"session_id\": \"D\", \"pid\": 2147483646, \"process_start_time\": 1.0}}\n  ]\n}}\n",
            me()
        ),
    );
    let removed = lease::file::prune(&reg, lease::PruneOptions::default(), T).expect("prune");
    assert_eq!(removed.removed.len(), 1);
    let expected = format!(
        "{{\"entries\": [{{\"lease_id\": \"0123456789abcdef0123456789abcdef\", \"metadata\": {{\"live_session_id\": \"tab-1\"}}, \"pid\": {}, \"process_start_time\": null, \"session_id\": \"S\", \"started_at\": 1795989978.5677974, \"surface\": \"tui\", \"updated_at\": 1795989978.5677974}}]}}",
        me()
    );
    assert_eq!(String::from_utf8(read_raw(&reg)).expect("utf-8"), expected);
}

#[test]
fn new_entry_has_hermes_fields_and_psutil_start_time() {
    let (_d, reg) = home();
    let g = lease::file::acquire(&reg, &req("S", "tab-9")).expect("granted");
    let text = String::from_utf8(read_raw(&reg)).expect("utf-8");
    let v: Value = serde_json::from_str(&text).expect("json");
    let e = &v["entries"][0];
    let keys: Vec<&str> = e.as_object().expect("object").keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["lease_id", "metadata", "pid", "process_start_time", "session_id", "started_at", "surface", "updated_at"]
    );
    assert_eq!(e["lease_id"], Value::String(g.lease_id.clone()));
    assert_eq!(e["pid"], Value::from(me()));
    assert!(!text.ends_with('\n') && !text.contains('\n'), "one line, no trailing newline");
    let start = e["process_start_time"].as_f64().expect("start time recorded");
    assert_eq!(Some(start), lease::owners::liveness::process_start_time(me()));
}

#[test]
fn bom_and_legacy_list_are_accepted_and_rewritten_as_an_object() {
    let (_d, reg) = home();
    let legacy = format!("\u{feff}[{{\"lease_id\": \"old\", \"session_id\": \"L\", \"pid\": \"{}\"}}]", me());
    write_raw(&reg, &legacy);
    let snap = lease::file::snapshot(&reg);
    assert_eq!(snap.leases.expect("readable").len(), 1);
    let g = lease::file::acquire(&reg, &req("S", "t")).expect("granted");
    lease::file::release(&reg, &g.lease_id, T).expect("release");
    assert_eq!(
        String::from_utf8(read_raw(&reg)).expect("utf-8"),
        format!("{{\"entries\": [{{\"lease_id\": \"old\", \"pid\": \"{}\", \"session_id\": \"L\"}}]}}", me())
    );
}

#[test]
fn registry_mode_is_kept_on_rewrite() {
    let (_d, reg) = home();
    write_raw(&reg, "{\"entries\": []}");
    std::fs::set_permissions(reg.path(), std::fs::Permissions::from_mode(0o640)).expect("chmod");
    lease::file::acquire(&reg, &req("S", "t")).expect("granted");
    let mode = std::fs::metadata(reg.path()).expect("stat").permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
}

#[test]
fn new_registry_gets_0666_less_umask() {
    let (_d, reg) = home();
    // umask is per process: set it in a child running the real binary.
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 027; exec '{}' --home '{}' acquire S --owner-pid {} >/dev/null",
            env!("CARGO_BIN_EXE_leasectl"),
            reg.home.display(),
            me()
        ))
        .env_remove("HERMES_HOME")
        .status()
        .expect("run leasectl");
    assert!(status.success());
    let mode = std::fs::metadata(reg.path()).expect("stat").permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
}

#[test]
fn failed_write_removes_its_temp_file_and_keeps_the_old_registry() {
    let (_d, reg) = home();
    // A directory where the registry should be: the final rename fails after the temp write.
    let target = reg.runtime_dir().join("blocked.json");
    std::fs::create_dir_all(target.join("inner")).expect("mkdir");
    let guard = lock::lock(&reg.lock_path(), T).expect("lock");
    let err =
        store::write(&guard, &target, &store::RegistryFile::default()).expect_err("rename onto a directory fails");
    assert!(err.to_string().contains("rename"), "{err}");
    assert!(store::leftover_temp_files(&reg.runtime_dir()).is_empty(), "temp file removed");
    assert!(target.join("inner").is_dir(), "old content untouched");
}

#[test]
fn zombie_and_thread_id_owners_are_dead() {
    // A child that exits and is not reaped is a zombie.
    let mut child = Command::new("true").spawn().expect("spawn");
    let pid = u64::from(child.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut prober;
    loop {
        prober = lease::Prober::new();
        if prober.state(pid) == lease::owners::liveness::ProcState::Zombie || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(lease::owners::liveness::judge_state(&prober.state(pid), None), Liveness::Dead(DeadCause::Zombie));
    child.wait().expect("reap");

    // A thread id is reachable under /proc but is not a process.
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let _ = tx.send(rustix::thread::gettid().as_raw_nonzero().get().unsigned_abs() as u64);
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().expect("tid");
    let verdict = lease::owners::liveness::judge_state(&lease::Prober::new().state(tid), None);
    assert_eq!(verdict, Liveness::Dead(DeadCause::ThreadId { tgid: me() }));
    let _ = stop_tx.send(());
    t.join().expect("join");
}

#[test]
fn start_time_equals_psutil_create_time() {
    let mut child = Command::new("sleep").arg("30").spawn().expect("spawn sleep");
    let pid = child.id();
    let ours = lease::owners::liveness::process_start_time(u64::from(pid)).expect("probe a running child");
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!("import psutil; print(repr(psutil.Process({pid}).create_time()))"))
        .output()
        .expect("python3 runs");
    let _ = child.kill();
    let _ = child.wait();
    assert!(out.status.success(), "psutil needed (pip install psutil): {}", String::from_utf8_lossy(&out.stderr));
    let theirs = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    // repr() is the shortest round-trip form: equal text means equal bits.
    assert_eq!(lease::format::pyjson::float_repr(ours), theirs, "bit-for-bit equal to psutil");
}

#[test]
fn transfer_keeps_the_slot_and_refuses_a_live_holder() {
    let (_d, reg) = home();
    let a = lease::file::acquire(&reg, &req("A", "t1")).expect("A");
    lease::file::acquire(&reg, &req("B", "t2")).expect("B");
    let refused = lease::file::transfer(&reg, &a.lease_id, "B", None, T).expect("ran").expect_err("B is held");
    assert_eq!(refused.reason, Reason::SessionNotOwned);
    let moved = lease::file::transfer(&reg, &a.lease_id, "C", None, T).expect("ran").expect("moved");
    assert_eq!((moved.lease_id(), moved.session_id()), (a.lease_id.as_str(), "C"));
    let sessions: Vec<String> =
        store::read(&reg.path()).expect("read").entries.iter().map(|e| e.session_id().to_owned()).collect();
    assert_eq!(sessions, vec!["C".to_owned(), "B".to_owned()]);
    assert!(matches!(lease::file::transfer(&reg, "nope", "D", None, T), Err(Error::NotFound(_))));
}

#[test]
fn force_release_needs_an_override_for_a_live_owner() {
    let (_d, reg) = home();
    let a = lease::file::acquire(&reg, &req("S", "t1")).expect("granted");
    let before = read_raw(&reg);
    let err = lease::file::force_release(&reg, &Target::Lease(a.lease_id.clone()), ForceOptions::default(), T)
        .expect_err("live");
    assert!(matches!(err, Error::LiveOwner(_)), "{err}");
    assert_eq!(read_raw(&reg), before);
    let dry = lease::file::force_release(
        &reg,
        &Target::Session("S".into()),
        ForceOptions { allow_live: true, dry_run: true },
        T,
    )
    .expect("dry run");
    assert!(dry.live_owner && dry.dry_run && dry.removed.len() == 1);
    assert_eq!(read_raw(&reg), before, "dry run writes nothing");
    let done = lease::file::force_release(
        &reg,
        &Target::Session("S".into()),
        ForceOptions { allow_live: true, dry_run: false },
        T,
    )
    .expect("forced");
    assert!(done.live_owner);
    assert!(store::read(&reg.path()).expect("read").entries.is_empty());
}

#[test]
fn doctor_reports_conflicts_empty_ids_temp_files_and_the_lock_holder() {
    let (_d, reg) = home();
    let pid = me();
    write_raw(
        &reg,
        format!(
            r#"{{"entries": [{{"lease_id": "a", "session_id": "S", "pid": {pid}}}, {{"lease_id": "b", "session_id": "S", "pid": {pid}}}]}}"#
        ),
    );
    let tmp = reg.runtime_dir().join(".active_sessions_abcdefgh.tmp");
    let f = std::fs::File::create(&tmp).expect("temp");
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(60)).expect("mtime");
    let guard = lock::lock(&reg.lock_path(), T).expect("lock");
    let d = lease::file::doctor(&reg);
    drop(guard);
    assert!(d.has_problems());
    assert_eq!(d.conflicts.get("S").map(Vec::len), Some(2));
    assert_eq!(d.leftover_temp_files, vec![tmp]);
    assert_eq!(d.lock_holder, Some(std::process::id()));

    write_raw(&reg, format!(r#"{{"entries": [{{"lease_id": "a", "session_id": "", "pid": {pid}}}]}}"#));
    let d = lease::file::doctor(&reg);
    assert_eq!(d.empty_session_ids, vec![0]);
    assert_eq!(d.problems[0].rule, Rule::SessionId);
    assert_eq!(d.problems[0].entry_index, Some(0));
}

#[test]
fn refusal_persists_the_prune() {
    let (_d, reg) = home();
    lease::file::acquire(&reg, &req("S", "t1")).expect("granted");
    let dead = r#"{"lease_id": "dead", "session_id": "D", "pid": 2147483646, "process_start_time": 1.0}"#;
    let text = String::from_utf8(read_raw(&reg)).expect("utf-8").replace("[{", &format!("[{dead}, {{"));
    write_raw(&reg, &text);
    assert_eq!(store::read(&reg.path()).expect("read").entries.len(), 2);
    let r = lease::file::acquire(&reg, &req("S", "other")).expect_err("held");
    assert_eq!(r.reason, Reason::SessionNotOwned);
    let left: Vec<String> =
        store::read(&reg.path()).expect("read").entries.iter().map(|e| e.lease_id().to_owned()).collect();
    assert_eq!(left.len(), 1);
    assert_ne!(left[0], "dead");
}

#[test]
fn capacity_message_names_the_holders() {
    let (_d, reg) = home();
    for (i, s) in ["A", "B", "C"].iter().enumerate() {
        let mut r = req(s, &format!("t{i}"));
        r.surface = Some(if i == 0 { "cli" } else { "desktop" }.into());
        r.cap = Some(3);
        lease::file::acquire(&reg, &r).expect("granted");
    }
    let mut r = req("D", "t9");
    r.cap = Some(3);
    let refusal = lease::file::acquire(&reg, &r).expect_err("full");
    assert_eq!(refusal.reason, Reason::MaxConcurrentSessions);
    assert!(refusal.message.contains("(3/3). Held by: desktop x2, cli, oldest 0s ago."), "{}", refusal.message);
}
