# usage: python hermes_gateway.py HERMES_HOME [--pythonpath DIR] [--timeout S] [--turn-timeout S]
#                                [--stop-timeout S]
#
# Run with the Hermes 0.22.2.post1 release venv's python. Starts a real, pip-installed
# `hermes gateway run` (the script beside sys.executable; foreground, no systemd, nothing
# beyond 127.0.0.1) with one platform, the generic webhook (gateway/platforms/webhook.py),
# and fake_openai.py (beside this file) as its model provider, as hermes_process.py does
# (model.provider custom, base_url, api_key, the telemetry answer). HERMES_HOME/config.yaml
# gets:
#   platforms.webhook.enabled true
#   platforms.webhook.extra.host 127.0.0.1, .port a free port,
#   platforms.webhook.extra.routes.chat {secret: INSECURE_NO_AUTH, prompt: "{text}"}
# INSECURE_NO_AUTH (no HMAC) is accepted only with a loopback host (WebhookAdapter._validate_route).
#
# The webhook needs aiohttp, which the release venv lacks (it is the "messaging" extra):
# --pythonpath DIR puts DIR (e.g. `pip install --target DIR aiohttp==3.14.3`) on the
# gateway's PYTHONPATH. Without aiohttp the driver stops at once and says so.
# The gateway's host-wide rendezvous lock (gateway/host_rendezvous.py, otherwise in
# ~/.local/state/hermes/gateway-locks) goes to HERMES_HOME/gateway-locks
# (HERMES_GATEWAY_LOCK_DIR), so two drivers on one host do not attach to each other.
#
# How a webhook POST becomes a turn: POST /webhooks/chat with header X-Request-ID: CHAT
# and body {"text": TEXT} is answered 202 at once; the adapter makes a MessageEvent whose
# chat_id is "webhook:v2:" + base64url(json ["default","chat",CHAT]) and hands it to the
# gateway's inbound path (gateway/run_inbound.py), which claims the active-session slot
# (gateway/run_busy.py, _claim_active_session_slot) under the session key
# agent:main:webhook:webhook:<chat_id>:webhook:chat. The reply is only logged
# ("[webhook] Response for <chat_id>: ..." in HERMES_HOME/logs/gateway.log). The delivery
# id is an idempotency key kept for an hour in the gateway's memory: a second POST with the
# same CHAT is answered "duplicate" and runs no turn, so one CHAT is one turn per gateway.
#
# Prints `READY <gateway_pid> <webhook_port>` once the webhook answers GET /health and the
# gateway has opened its inbound gate: logs/gateway.log says "Press Ctrl+C to stop", logged
# after _finish_startup_restore (gateway/run_startup.py). Earlier, POSTs are answered 202 but
# their turns are only queued ("Queued inbound message during gateway startup restore") until
# the turn machinery has warmed up, ~2 s after gateway_state.json already says "running".
# Then reads commands on stdin, one a line, and
# answers each with one line on stdout:
#   say CHAT TEXT    POST TEXT for chat CHAT; after the turn ends:
#                    `SAID CHAT SESSION_KEY|- lease-during-turn=yes|no lease-after=yes|no took=S reply=TEXT`
#                    (the turn's lease: a CHAT entry other than those there before the POST; with
#                    such entries (see plant) also ` prior-leases=N prior-left=M` before reply=);
#                    while the provider is stalled, as soon as the lease shows and the completion is
#                    held at the provider (the turn goes on): `SAID CHAT SESSION_KEY lease-during-turn=yes
#                    turn=running took=S`;
#                    a repeated CHAT: `SAID CHAT - duplicate`; no end within --turn-timeout:
#                    `SAID CHAT SESSION_KEY|- lease-during-turn=yes|no timeout`
#   wait CHAT [S]    wait (default --turn-timeout) for CHAT's turn to end and its lease to go:
#                    `DONE CHAT lease-left=yes|no reply=TEXT|- waited=S`
#   stall on|off     the fake provider's stall (its POST /_stall, /_unstall): `STALL on|off held=N`
#   leases           the registry's entries as one JSON line
#   lease CHAT       CHAT's entry (JSON) or `null`
#   plant CHAT [PID|- [AGE]]
#                    write into the registry (under its lock) the entry the gateway writes for
#                    CHAT: session_id = the session key, surface gateway:webhook, pid (default the
#                    gateway's) with its process start time, metadata {platform, chat_id, user_id,
#                    live_session_id}; a fresh lease_id; taken AGE seconds ago (default 0; PID - is the
#                    gateway's). `PLANTED CHAT {entry}`
#   drop CHAT        remove CHAT's entries from the registry: `DROPPED CHAT N`
#   proc             the gateway process as one JSON line: pid, cmdline (/proc/PID/cmdline split on
#                    NUL), parent, children, threads
#   quit             SIGTERM to the gateway, wait up to --stop-timeout (then SIGKILL):
#                    `STOPPED exit=N|signal=N|killed after S leases-left=N` (entries with its pid).
#                    0.22.2 exits 1 on SIGTERM by design ("signal-initiated shutdown without restart
#                    request so the service manager can revive the gateway").
# An unknown command: `ERR ...`. SIGTERM/SIGINT to the driver or stdin EOF: as quit, then exit.
# The exit status is 0 when the gateway exited by itself after SIGTERM and left no lease.
#
# Logs, all in HERMES_HOME: hermes_gateway.stdout.log / hermes_gateway.stderr.log (the
# gateway's own), logs/gateway.log (Hermes' log, INFO), fake_openai.requests.log (one line a
# provider request). Timings go to stderr.
import base64
import fcntl
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROUTE = "chat"
USAGE = ("usage: python hermes_gateway.py HERMES_HOME [--pythonpath DIR] [--timeout S] [--turn-timeout S] "
         "[--stop-timeout S]")

argv = sys.argv[1:]
if not argv or argv[0].startswith("-"):
    print(USAGE, file=sys.stderr)
    sys.exit(2)
home = Path(argv[0]).resolve()


def opt(name, default):
    return argv[argv.index(name) + 1] if name in argv else default


extra_path = opt("--pythonpath", None)
start_timeout = float(opt("--timeout", 180))
turn_timeout = float(opt("--turn-timeout", 120))
stop_timeout = float(opt("--stop-timeout", 120))

hermes = Path(sys.executable).parent / "hermes"
if not hermes.exists():
    print(f"no hermes script beside {sys.executable}", file=sys.stderr)
    sys.exit(2)
registry = home / "runtime" / "active_sessions.json"
registry_lock = home / "runtime" / "active_sessions.lock"
gateway_log = home / "logs" / "gateway.log"

server = None  # the fake provider
fake_port = None
gateway = None  # the gateway's Popen
webhook_port = None
stop_requested = threading.Event()


def say_line(text):
    print(text, flush=True)


def note(text):
    print(f"hermes_gateway: {text}", file=sys.stderr, flush=True)


# --- the registry -------------------------------------------------------------------

def read_entries():
    # Replaced whole by rename: no lock needed to look.
    try:
        data = json.loads(registry.read_bytes().decode("utf-8-sig"))
    except (FileNotFoundError, ValueError):
        return []
    entries = data.get("entries") if isinstance(data, dict) else data
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def rewrite_entries(change):
    # As hermes_cli/active_sessions.py does: flock on active_sessions.lock, then an atomic
    # replace of {"entries": [...]} (sort_keys, no indent).
    registry.parent.mkdir(parents=True, exist_ok=True)
    with open(registry_lock, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            entries = change(read_entries())
            tmp = registry.with_name(f".{registry.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"entries": entries}, sort_keys=True), encoding="utf-8")
            os.replace(tmp, registry)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def chat_id_of(chat):
    # gateway/platforms/webhook.py, _WebhookDeliveryIdentity.session_chat_id
    payload = json.dumps(("default", ROUTE, chat), ensure_ascii=False, separators=(",", ":")).encode()
    return "webhook:v2:" + base64.urlsafe_b64encode(payload).decode("ascii").rstrip("=")


def session_key_of(chat):
    # gateway/session.py, build_session_key: namespace, platform, chat_type, chat_id, participant
    return f"agent:main:webhook:webhook:{chat_id_of(chat)}:webhook:{ROUTE}"


def leases_of(chat):
    cid, key = chat_id_of(chat), session_key_of(chat)
    return [e for e in read_entries() if (e.get("metadata") or {}).get("chat_id") == cid or e.get("session_id") == key]


def lease_of(chat, prior=()):
    # CHAT's entry, leaving out the lease ids in prior (entries there before the turn).
    for e in leases_of(chat):
        if e.get("lease_id") not in prior:
            return e
    return None


def process_start_time(pid):
    # psutil.Process(pid).create_time() on Linux: boot time + starttime / clock ticks.
    with open("/proc/stat") as fh:
        btime = next(float(line.split()[1]) for line in fh if line.startswith("btime "))
    stat = Path(f"/proc/{pid}/stat").read_text()
    start_ticks = float(stat[stat.rindex(")") + 2:].split()[19])
    return start_ticks / os.sysconf("SC_CLK_TCK") + btime


# --- the gateway's log --------------------------------------------------------------

class LogTail:
    """Reads HERMES_HOME/logs/gateway.log from where it was when made."""

    def __init__(self, path):
        self.path = path
        try:
            self.offset = path.stat().st_size
        except FileNotFoundError:
            self.offset = 0
        self.text = ""

    def poll(self):
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return self.text
        self.offset += len(data)
        self.text += data.decode("utf-8", "replace")
        return self.text


def reply_in(text, chat):
    marker = f"[webhook] Response for {chat_id_of(chat)}: "
    at = text.find(marker)
    if at < 0:
        return None
    return text[at + len(marker):].split("\n", 1)[0]


tails = {}  # chat -> LogTail made just before its POST
priors = {}  # chat -> lease ids CHAT had in the registry just before its POST


# --- HTTP -----------------------------------------------------------------------------

def http(method, url, body=None, headers=None, timeout=10):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- commands -------------------------------------------------------------------------

def wait_turn_end(chat, limit, seen_lease=False):
    """Until CHAT's reply is logged and the turn's lease is gone. (reply, seen_lease, lease_left).
    The turn's lease is any entry for CHAT but those there before the POST (a planted one that
    the turn re-acquires gets a new lease id, so it counts as the turn's)."""
    tail = tails.get(chat) or LogTail(gateway_log)
    prior = priors.get(chat, set())
    t = time.monotonic()
    reply = None
    while time.monotonic() - t < limit and not stop_requested.is_set():
        lease = lease_of(chat, prior)
        seen_lease = seen_lease or lease is not None
        if reply is None:
            reply = reply_in(tail.poll(), chat)
        if reply is not None and lease is None:
            return reply, seen_lease, False
        if gateway.poll() is not None:
            break
        time.sleep(0.02)
    return reply, seen_lease, lease_of(chat, prior) is not None


def fake_state():
    return json.loads(http("GET", f"http://127.0.0.1:{fake_port}/_stall")[1])


def cmd_say(chat, text):
    tails[chat] = LogTail(gateway_log)
    prior = priors[chat] = {e.get("lease_id") for e in leases_of(chat)}
    held_before = fake_state()["held"]
    t0 = time.monotonic()
    status, body = http("POST", f"http://127.0.0.1:{webhook_port}/webhooks/{ROUTE}",
                        json.dumps({"text": text}).encode(),
                        {"Content-Type": "application/json", "X-Request-ID": chat})
    if status == 200 and '"duplicate"' in body:
        return f"SAID {chat} - duplicate"
    if status != 202:
        return f"SAID {chat} - http={status} {body.strip()}"
    note_prior = f" prior-leases={len(prior)}" if prior else ""
    if fake_state()["stalled"]:
        # Answer once the turn holds its lease and its completion is held at the provider.
        while time.monotonic() - t0 < turn_timeout and not stop_requested.is_set():
            lease = lease_of(chat, prior)
            if lease is not None and fake_state()["held"] > held_before:
                return (f"SAID {chat} {lease.get('session_id')} lease-during-turn=yes turn=running "
                        f"took={time.monotonic() - t0:.2f}s{note_prior}")
            if reply_in(tails[chat].poll(), chat) is not None:
                break  # ended (refused?) without a lease
            time.sleep(0.02)
    seen = None
    t = time.monotonic()
    while seen is None and time.monotonic() - t < 5:  # the claim comes within ms of the 202
        seen = lease_of(chat, prior)
        if seen is None and reply_in(tails[chat].poll(), chat) is not None:
            break
        time.sleep(0.01)
    reply, seen_lease, left = wait_turn_end(chat, turn_timeout - (time.monotonic() - t0), seen is not None)
    key = seen.get("session_id") if seen else "-"
    took = time.monotonic() - t0
    if prior:
        still = {e.get("lease_id") for e in leases_of(chat)} & prior
        note_prior += f" prior-left={len(still)}"
    if reply is None:
        return (f"SAID {chat} {key} lease-during-turn={'yes' if seen_lease else 'no'} timeout "
                f"took={took:.2f}s{note_prior}")
    return (f"SAID {chat} {key} lease-during-turn={'yes' if seen_lease else 'no'} "
            f"lease-after={'yes' if left else 'no'} took={took:.2f}s{note_prior} reply={reply}")


def cmd_wait(chat, limit):
    t0 = time.monotonic()
    reply, _, left = wait_turn_end(chat, limit)
    return (f"DONE {chat} lease-left={'yes' if left else 'no'} reply={reply if reply is not None else '-'} "
            f"waited={time.monotonic() - t0:.2f}s")


def cmd_plant(chat, pid, age=0.0):
    now = time.time() - age
    key = session_key_of(chat)
    entry = {
        "lease_id": uuid.uuid4().hex,
        "metadata": {"chat_id": chat_id_of(chat), "live_session_id": key, "platform": "webhook",
                     "user_id": f"webhook:{ROUTE}"},
        "pid": pid,
        "process_start_time": process_start_time(pid),
        "session_id": key,
        "started_at": now,
        "surface": "gateway:webhook",
        "updated_at": now,
    }
    rewrite_entries(lambda entries: entries + [entry])
    return f"PLANTED {chat} {json.dumps(entry, sort_keys=True)}"


def cmd_drop(chat):
    key, cid = session_key_of(chat), chat_id_of(chat)
    dropped = []

    def change(entries):
        kept = [e for e in entries
                if e.get("session_id") != key and (e.get("metadata") or {}).get("chat_id") != cid]
        dropped.append(len(entries) - len(kept))
        return kept

    rewrite_entries(change)
    return f"DROPPED {chat} {dropped[0]}"


def cmdline_of(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")
    except OSError:
        return None


def cmd_proc():
    pid = gateway.pid
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    ppid, pgid, sid = int(fields[1]), int(fields[2]), int(fields[3])
    children = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                s = (p / "stat").read_text()
            except OSError:
                continue
            if int(s[s.rindex(")") + 2:].split()[1]) == pid:
                children.append({"pid": int(p.name), "cmdline": cmdline_of(int(p.name))})
    return json.dumps({"pid": pid, "cmdline": cmdline_of(pid), "ppid": ppid, "parent_cmdline": cmdline_of(ppid),
                       "pgid": pgid, "sid": sid, "children": children,
                       "threads": len(list(Path(f"/proc/{pid}/task").iterdir())),
                       "process_start_time": process_start_time(pid)})


def stop_gateway():
    if gateway is None:
        return "STOPPED not-started", False
    pid = gateway.pid
    t1 = time.monotonic()
    if gateway.poll() is None:
        gateway.send_signal(signal.SIGTERM)
    how = "killed"
    try:
        rc = gateway.wait(stop_timeout)
        how = f"exit={rc}" if rc >= 0 else f"signal={-rc}"
    except subprocess.TimeoutExpired:
        note(f"gateway did not exit within {stop_timeout}s; killing it")
        gateway.kill()
        gateway.wait()
    took = time.monotonic() - t1
    left = [e for e in read_entries() if str(e.get("pid")) == str(pid)]
    return f"STOPPED {how} after {took:.2f}s leases-left={len(left)}", how != "killed" and not left


def handle(line):
    parts = line.split(None, 2)
    if not parts:
        return None
    cmd = parts[0]
    if cmd == "say" and len(parts) == 3:
        return cmd_say(parts[1], parts[2])
    if cmd == "wait" and len(parts) >= 2:
        return cmd_wait(parts[1], float(parts[2]) if len(parts) == 3 else turn_timeout)
    if cmd == "stall" and len(parts) == 2 and parts[1] in ("on", "off"):
        state = json.loads(http("POST", f"http://127.0.0.1:{fake_port}/{'_stall' if parts[1] == 'on' else '_unstall'}",
                                b"")[1])
        return f"STALL {'on' if state['stalled'] else 'off'} held={state['held']}"
    if cmd == "leases" and len(parts) == 1:
        return json.dumps(read_entries(), sort_keys=True)
    if cmd == "lease" and len(parts) == 2:
        return json.dumps(lease_of(parts[1]), sort_keys=True)
    if cmd == "plant" and len(parts) >= 2:
        parts = line.split()
        pid = int(parts[2]) if len(parts) >= 3 and parts[2] != "-" else gateway.pid
        return cmd_plant(parts[1], pid, float(parts[3]) if len(parts) == 4 else 0.0)
    if cmd == "drop" and len(parts) == 2:
        return cmd_drop(parts[1])
    if cmd == "proc" and len(parts) == 1:
        return cmd_proc()
    return f"ERR unknown command: {line.strip()}"


# --- main -----------------------------------------------------------------------------

def on_signal(signum, frame):
    stop_requested.set()


def main():
    global server, fake_port, gateway, webhook_port
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    home.mkdir(parents=True, exist_ok=True)

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "OPENROUTER_", "WEBHOOK_", "API_SERVER_"))
           and k not in ("INVOCATION_ID", "NOTIFY_SOCKET", "JOURNAL_STREAM", "PYTHONPATH")}
    env.update(HERMES_HOME=str(home), HERMES_GATEWAY_LOCK_DIR=str(home / "gateway-locks"), NO_COLOR="1")
    if extra_path:
        env["PYTHONPATH"] = str(Path(extra_path).resolve())
    probe = subprocess.run([sys.executable, "-c", "import aiohttp"], env=env, capture_output=True)
    if probe.returncode != 0:
        note("aiohttp does not import with this python (the webhook platform needs it; the release venv "
             "lacks it): `python -m pip install --target DIR aiohttp==3.14.3`, then pass --pythonpath DIR")
        return 2

    server = subprocess.Popen(
        [sys.executable, str(HERE / "fake_openai.py"), "0", "--log", str(home / "fake_openai.requests.log")],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    fake_port = int(server.stdout.readline())
    webhook_port = free_port()
    config = (
        "model:\n"
        "  default: fake-model\n"
        "  provider: custom\n"
        f"  base_url: http://127.0.0.1:{fake_port}/v1\n"
        "  api_key: sk-fake-local\n"
        "telemetry:\n"
        "  shared_metrics:\n"
        "    enabled: false\n"
        "    send: false\n"
        "    offer_version: 2\n"
        "platforms:\n"
        "  webhook:\n"
        "    enabled: true\n"
        "    extra:\n"
        "      host: 127.0.0.1\n"
        f"      port: {webhook_port}\n"
        "      routes:\n"
        f"        {ROUTE}:\n"
        "          secret: INSECURE_NO_AUTH\n"
        "          prompt: \"{text}\"\n"
    )
    (home / "config.yaml").write_text(config, encoding="utf-8")
    workdir = home / "hermes_gateway.cwd"
    workdir.mkdir(exist_ok=True)

    boot_log = LogTail(gateway_log)
    t0 = time.monotonic()
    gateway = subprocess.Popen(
        [str(hermes), "gateway", "run"], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
        stdout=open(home / "hermes_gateway.stdout.log", "ab"), stderr=open(home / "hermes_gateway.stderr.log", "ab"),
        start_new_session=True)
    health_at = running_at = None
    while time.monotonic() - t0 < start_timeout and not stop_requested.is_set():
        if gateway.poll() is not None:
            note(f"gateway exited during startup ({gateway.returncode}); see {home / 'hermes_gateway.stderr.log'}")
            return 2
        if health_at is None:
            try:
                if http("GET", f"http://127.0.0.1:{webhook_port}/health", timeout=1)[0] == 200:
                    health_at = time.monotonic() - t0
            except OSError:
                pass
        if health_at is not None:
            try:
                state = json.loads((home / "gateway_state.json").read_text())
            except (OSError, ValueError):
                state = {}
            if running_at is None and state.get("gateway_state") == "running" and state.get("pid") == gateway.pid:
                running_at = time.monotonic() - t0
            if running_at is not None and "Press Ctrl+C to stop" in boot_log.poll():
                break
        time.sleep(0.1)
    else:
        note(f"gateway not ready after {time.monotonic() - t0:.1f}s")
        return 2
    note(f"webhook /health after {health_at:.2f}s, gateway_state running after {running_at:.2f}s, "
         f"inbound gate open after {time.monotonic() - t0:.2f}s")
    say_line(f"READY {gateway.pid} {webhook_port}")

    lines = queue.Queue()

    def reader():
        for line in sys.stdin:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=reader, daemon=True).start()
    while not stop_requested.is_set():
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            if gateway.poll() is not None:
                left = [e for e in read_entries() if str(e.get("pid")) == str(gateway.pid)]
                say_line(f"STOPPED by-itself exit={gateway.returncode} leases-left={len(left)}")
                return 1
            continue
        if line is None or line.strip() == "quit":
            break
        try:
            answer = handle(line)
        except Exception as exc:  # one bad command must not end the session
            answer = f"ERR {type(exc).__name__}: {exc}"
        if answer is not None:
            say_line(answer)
    text, ok = stop_gateway()
    say_line(text)
    return 0 if ok else 1


def cleanup():
    if gateway is not None:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()
        try:  # whatever it started and left behind (its own session and process group)
            os.killpg(gateway.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if server is not None and server.poll() is None:
        server.terminate()
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    rc = 2
    try:
        rc = main()
    finally:
        cleanup()
    sys.exit(rc)
