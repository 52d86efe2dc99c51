"""``hermes_cli.active_sessions``, served by leasectl.

The functions Hermes' own tests import, each doing its work by running the leasectl
binary (``$LEASECTL``, else ``leasectl`` on PATH), so a Hermes test run against this
module tests leasectl's fence: acquire, release and the snapshot are leasectl's.
The owner of every lease is this Python process (``os.getpid()``), as in Hermes.

``_state_path``, ``_read_entries`` and ``_write_entries`` are the test hooks a test
uses to plant a state (a crashed owner, a recycled pid): they touch the file the way
Hermes does (strict JSON, sorted keys, a temp file renamed over the registry under the
registry's flock), because no leasectl command writes hand-made entries, by design.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional

SESSION_NOT_OWNED = "SESSION_NOT_OWNED"
MAX_CONCURRENT_SESSIONS = "MAX_CONCURRENT_SESSIONS"
SESSION_COORDINATION_UNAVAILABLE = "SESSION_COORDINATION_UNAVAILABLE"

# leasectl's exit codes for its refusals (leasectl --help).
_REFUSAL_EXITS = {3: SESSION_NOT_OWNED, 4: MAX_CONCURRENT_SESSIONS, 5: SESSION_COORDINATION_UNAVAILABLE}


class ActiveSessionLease:
    """A granted lease: ``recorded`` is False for a session with no stored id."""

    def __init__(self, lease_id: str, session_id: str, recorded: bool, home: str):
        self.lease_id = lease_id
        self.session_id = session_id
        self.recorded = recorded
        self.home = home

    def __repr__(self) -> str:
        return f"ActiveSessionLease({self.lease_id!r}, session={self.session_id!r}, recorded={self.recorded})"


class ActiveSessionRefusal:
    """Why an acquire was refused: ``reason`` is the contract, the text is for a person."""

    def __init__(self, reason: str, message: str, holder: Optional[dict] = None):
        self.reason = reason
        self.message = message
        self.holder = holder

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"ActiveSessionRefusal({self.reason}: {self.message})"


class LeasectlError(RuntimeError):
    """leasectl failed in a way that is not a refusal (a usage error, a crash)."""


def _leasectl() -> str:
    return os.environ.get("LEASECTL") or "leasectl"


def _home() -> Path:
    """Hermes' home: ``$HERMES_HOME`` (trimmed, non-empty), else ``~/.hermes``."""
    env = os.environ.get("HERMES_HOME", "").strip()
    return Path(env) if env else Path.home() / ".hermes"


def _run(args: list[str]) -> subprocess.CompletedProcess:
    # leasectl finds the home itself, from HERMES_HOME, as Hermes does.
    return subprocess.run([_leasectl(), *args], capture_output=True, text=True, timeout=60)


def _json_out(done: subprocess.CompletedProcess, what: str) -> Any:
    try:
        return json.loads(done.stdout)
    except ValueError as e:
        raise LeasectlError(f"leasectl {what} exited {done.returncode}: {done.stderr.strip()}") from e


def _cap(config: Optional[dict]) -> Optional[int]:
    """The cap a config dict sets (spec §6): the top-level key if present (even null),
    else ``gateway.max_concurrent_sessions``; null, 0 or negative is no cap; a bool or a
    non-integral number is ignored; a string is parsed as base-10."""
    if "max_concurrent_sessions" in config:
        raw = config["max_concurrent_sessions"]
    else:
        gateway = config.get("gateway")
        raw = gateway.get("max_concurrent_sessions") if isinstance(gateway, dict) else None
    if isinstance(raw, bool):
        return None
    if isinstance(raw, float):
        raw = int(raw) if raw.is_integer() else None
    if isinstance(raw, str):
        try:
            raw = int(raw.strip(), 10)
        except ValueError:
            return None
    if not isinstance(raw, int) or raw <= 0:
        return None
    return raw


def try_acquire_active_session(
    session_id: str,
    surface: Optional[str] = None,
    config: Optional[dict] = None,
    metadata: Optional[dict] = None,
    track_liveness: bool = False,
) -> tuple[Optional[ActiveSessionLease], Optional[ActiveSessionRefusal]]:
    """Acquire through leasectl's fence for this process: ``(lease, None)`` when granted,
    ``(None, refusal)`` when refused. A config dict sets the cap (none when it sets none);
    without one, leasectl reads ``config.yaml`` as Hermes does."""
    args = ["acquire", "--owner-pid", str(os.getpid()), "--json"]
    if surface is not None:
        args += ["--surface", surface]
    if config is not None:
        args += ["--max", str(_cap(config) or 0)]
    if track_liveness:
        args.append("--track-liveness")
    for key, value in (metadata or {}).items():
        if key == "live_session_id":
            args += ["--live-id", str(value)]
        else:
            args += ["--meta", f"{key}={value}"]
    done = _run([*args, "--", session_id])
    if done.returncode == 0:
        out = _json_out(done, "acquire")
        return ActiveSessionLease(out["lease_id"], session_id, bool(out.get("recorded")), str(_home())), None
    if done.returncode in _REFUSAL_EXITS:
        out = _json_out(done, "acquire")
        reason = out.get("reason") or _REFUSAL_EXITS[done.returncode]
        return None, ActiveSessionRefusal(reason, out.get("message", ""), out.get("holder"))
    raise LeasectlError(f"leasectl acquire exited {done.returncode}: {done.stderr.strip()}")


def release_active_session(lease: Optional[ActiveSessionLease]) -> None:
    """Release exactly this lease; a lease already gone (or never recorded) is fine."""
    if lease is None or not lease.recorded:
        return
    done = _run(["--home", lease.home, "release", "--owner-pid", str(os.getpid()), "--json", lease.lease_id])
    if done.returncode != 0:
        raise LeasectlError(f"leasectl release exited {done.returncode}: {done.stderr.strip()}")


def active_session_registry_snapshot() -> list[dict]:
    """The entries of live owners (dead and recycled ones are not holders), from ``leasectl ls``."""
    if not _home().is_dir():
        return []  # a fresh home has no holders; ls refuses a home that is not there
    done = _run(["ls", "--json"])
    if done.returncode != 0:
        raise LeasectlError(f"leasectl ls exited {done.returncode}: {done.stderr.strip()}")
    registries = _json_out(done, "ls")["registries"]
    held = []
    for registry in registries:
        if registry.get("error"):
            raise LeasectlError(f"leasectl ls: {registry['error']}")
        held += [lease["entry"] for lease in registry["leases"] if lease["liveness"] not in ("dead", "recycled")]
    return held


def _state_path() -> Path:
    return _home() / "runtime" / "active_sessions.json"


def _read_entries(path: Path) -> list[dict]:
    """The registry's entries as Hermes reads them: a BOM tolerated, a missing file empty,
    a bare list the legacy form."""
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        return []
    data = json.loads(text)
    entries = data if isinstance(data, list) else data["entries"]
    return [dict(e) for e in entries]


def _write_entries(path: Path, entries: list[dict]) -> None:
    """Replace the registry whole, as Hermes writes it, under its flock."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"entries": entries}, sort_keys=True, ensure_ascii=False)
    with open(path.parent / "active_sessions.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        fd, tmp = tempfile.mkstemp(prefix=".active_sessions_", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
