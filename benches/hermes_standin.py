#!/usr/bin/env python3
"""The floors bench's in-process anchor: an acquire and its release done the way the
protocol (shared/spec/registry-protocol.md) has Hermes do them, inside one warm Python
process, the least Hermes' own module can do (it is not here to measure): the flock, a
strict read, dead owners pruned (psutil), exclusivity and the cap, then a temp file
written, fsynced and renamed over the registry, and the release the same way.

    python3 benches/hermes_standin.py HOME [CYCLES]

Prints the median milliseconds of CYCLES cycles (default 5) after one warm-up cycle;
with `--serve` after HOME, does so again for each line read on stdin (the floors bench
keeps one warm process, as Hermes' lives in a long-running one, and starts no Python
between the processes it times)."""

import fcntl
import json
import os
import statistics
import sys
import tempfile
import time
import uuid

import psutil

SESSION_NOT_OWNED = "SESSION_NOT_OWNED"
MAX_CONCURRENT_SESSIONS = "MAX_CONCURRENT_SESSIONS"
SESSION_COORDINATION_UNAVAILABLE = "SESSION_COORDINATION_UNAVAILABLE"


class Refused(Exception):
    pass


def paths(home):
    runtime = os.path.join(home, "runtime")
    return runtime, os.path.join(runtime, "active_sessions.json"), os.path.join(runtime, "active_sessions.lock")


def read_strictly(path):
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8-sig")
    except FileNotFoundError:
        return []
    data = json.loads(text)
    entries = data if isinstance(data, list) else data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise Refused(SESSION_COORDINATION_UNAVAILABLE)
    seen = set()
    for e in entries:
        ok = (
            isinstance(e, dict)
            and isinstance(e.get("lease_id"), str)
            and e["lease_id"].strip()
            and e["lease_id"] not in seen
            and isinstance(e.get("session_id"), str)
            and e["session_id"].strip()
            and isinstance(e.get("pid"), int)
            and not isinstance(e.get("pid"), bool)
            and e["pid"] > 0
        )
        if not ok:
            raise Refused(SESSION_COORDINATION_UNAVAILABLE)
        seen.add(e["lease_id"])
    return entries


def alive(entry):
    try:
        p = psutil.Process(entry["pid"])
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        recorded = entry.get("process_start_time")
        return recorded is None or abs(p.create_time() - recorded) < 0.001
    except psutil.Error:
        return False


def write(runtime, path, entries):
    try:
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = None
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=".active_sessions_", suffix=".tmp", dir=runtime)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(json.dumps({"entries": entries}, sort_keys=True, ensure_ascii=False))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def locked(lock_path):
    f = open(lock_path, "a")
    fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    return f


def acquire(home, session_id, surface, live_session_id, cap=None):
    runtime, path, lock_path = paths(home)
    os.makedirs(runtime, exist_ok=True)
    with locked(lock_path):
        entries = [e for e in read_strictly(path) if alive(e)]
        me = os.getpid()
        for e in entries:
            if e["session_id"] == session_id:
                same = e["pid"] == me and live_session_id and e.get("metadata", {}).get("live_session_id") == live_session_id
                if not same:
                    write(runtime, path, entries)
                    raise Refused(SESSION_NOT_OWNED)
        entries = [e for e in entries if e["session_id"] != session_id]
        if cap and len(entries) >= cap:
            write(runtime, path, entries)
            raise Refused(MAX_CONCURRENT_SESSIONS)
        now = time.time()
        entry = {
            "lease_id": uuid.uuid4().hex,
            "metadata": {"live_session_id": live_session_id},
            "pid": me,
            "process_start_time": psutil.Process(me).create_time(),
            "session_id": session_id,
            "started_at": now,
            "surface": surface,
            "updated_at": now,
        }
        write(runtime, path, entries + [entry])
        return entry["lease_id"]


def release(home, lease_id):
    runtime, path, lock_path = paths(home)
    with locked(lock_path):
        entries = read_strictly(path)
        kept = [e for e in entries if e["lease_id"] != lease_id]
        if len(kept) != len(entries):
            write(runtime, path, kept)


def cycle(home):
    started = time.perf_counter()
    release(home, acquire(home, "FLOOR", "cli", "tab-1"))
    return (time.perf_counter() - started) * 1000.0


def main():
    home = sys.argv[1]
    serve = sys.argv[2:3] == ["--serve"]
    rest = sys.argv[3:] if serve else sys.argv[2:]
    cycles = int(rest[0]) if rest else 5
    cycle(home)
    if not serve:
        print("%.3f" % statistics.median(cycle(home) for _ in range(cycles)))
        return
    for _ in sys.stdin:
        print("%.3f" % statistics.median(cycle(home) for _ in range(cycles)), flush=True)


if __name__ == "__main__":
    main()
