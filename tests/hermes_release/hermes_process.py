# usage: python hermes_process.py HERMES_HOME [--stop term|int|hup|eof|exit] [--timeout S] [--say TEXT]
#
# Run with a Hermes release venv's python. Starts a real, pip-installed `hermes`
# (the script beside sys.executable) that holds an active-session lease, with no
# model provider: fake_openai.py (beside this file) answers the OpenAI API on
# 127.0.0.1, and HERMES_HOME/config.yaml points the "custom" provider at it
# (model.provider custom, model.base_url http://127.0.0.1:PORT/v1, model.api_key,
# model.default fake-model). Without a provider `hermes chat` stops at its first-run
# guard ("It looks like Hermes isn't configured yet").
#
# How Hermes holds a lease (the same in 0.19.0, 0.21.3.post1 and 0.22.2.post1): the
# interactive CLI, `hermes chat`, claims its session's lease at the start of
# HermesCLI.run() (cli.py, `_claim_active_session("cli")`), before the banner and
# before any message, and holds it while idle at the prompt. It needs a terminal
# (prompt_toolkit), so it runs on a pty here. It releases the lease on its way out
# (the end of run(), and atexit): on SIGTERM, SIGHUP, Ctrl-D (stdin EOF on the pty)
# and /exit. SIGINT does not stop an idle CLI (it stays at the prompt). 0.19.0 records
# a lease only when a cap is configured, so for a release without per-session
# exclusivity config.yaml gets `max_concurrent_sessions: 64`. 0.22 asks a first-run
# telemetry question before the chat; config.yaml holds the answer.
#
# Prints `HOLDING <pid> <session_id>` once the registry shows the hermes process's
# lease, then waits. With --say TEXT it first types TEXT as a message once the prompt
# is drawn (one turn through the fake provider, streamed) and prints
# `SAID answered|no-request lease-held=yes|no`. On SIGTERM (or SIGINT) it stops hermes
# the --stop way (default term: SIGTERM to hermes), waits up to 30 s for it to exit
# (then SIGKILL), and prints `RELEASED yes|no stop=HOW exit=N|signal=N|killed after S`;
# its exit status is 0 when hermes exited and its lease is gone.
# Everything hermes wrote to its terminal is kept in HERMES_HOME/hermes_process.pty.log,
# the fake provider's request log in HERMES_HOME/fake_openai.requests.log.
# Timings go to stderr.
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


argv = sys.argv[1:]
if not argv or argv[0].startswith("-"):
    print("usage: python hermes_process.py HERMES_HOME [--stop term|int|hup|eof|exit] [--timeout S] [--say TEXT]",
          file=sys.stderr)
    sys.exit(2)
home = Path(argv[0]).resolve()
stop_how = "term"
start_timeout = 120.0
say = None
if "--say" in argv:
    say = argv[argv.index("--say") + 1]
if "--stop" in argv:
    stop_how = argv[argv.index("--stop") + 1]
if "--timeout" in argv:
    start_timeout = float(argv[argv.index("--timeout") + 1])
if stop_how not in ("term", "int", "hup", "eof", "exit"):
    print(f"unknown --stop {stop_how}", file=sys.stderr)
    sys.exit(2)

hermes = Path(sys.executable).parent / "hermes"
if not hermes.exists():
    print(f"no hermes script beside {sys.executable}", file=sys.stderr)
    sys.exit(2)
registry = home / "runtime" / "active_sessions.json"


def needs_cap() -> bool:
    # 0.19.0 has no per-session exclusivity and records nothing without a cap.
    # Importing the registry module does not scaffold HERMES_HOME.
    os.environ["HERMES_HOME"] = str(home)
    import hermes_cli.active_sessions as m
    return not hasattr(m, "SESSION_NOT_OWNED")


def read_entries():
    # The registry is only ever replaced whole by rename: no lock needed to look.
    try:
        raw = registry.read_bytes()
    except FileNotFoundError:
        return []
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except ValueError:
        return []
    entries = data.get("entries") if isinstance(data, dict) else data
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def lease_of(pid):
    for e in read_entries():
        try:
            if int(e.get("pid")) == pid:
                return e
        except (TypeError, ValueError):
            pass
    return None


server = None
hermes_pid = None
hermes_pgid = None
stop_requested = threading.Event()


def on_signal(signum, frame):
    stop_requested.set()


def cleanup():
    if hermes_pgid is not None:
        # pty.fork made hermes a session and process-group leader: whatever it started
        # and left behind goes too.
        try:
            os.killpg(hermes_pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if hermes_pid is not None:
        try:
            os.waitpid(hermes_pid, 0)
        except ChildProcessError:
            pass
    if server is not None and server.poll() is None:
        server.terminate()
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main():
    global server, hermes_pid, hermes_pgid
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    home.mkdir(parents=True, exist_ok=True)
    cap = needs_cap()

    server = subprocess.Popen(
        [sys.executable, str(HERE / "fake_openai.py"), "0", "--log", str(home / "fake_openai.requests.log")],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    port = int(server.stdout.readline())

    config = (
        "model:\n"
        "  default: fake-model\n"
        "  provider: custom\n"
        f"  base_url: http://127.0.0.1:{port}/v1\n"
        "  api_key: sk-fake-local\n"
        # 0.22 asks a first-run shared-metrics question before an interactive chat
        # (hermes_cli/observability/shared_metrics_consent.py, offer_consent_before_chat);
        # this is the recorded "No thanks" that settles it. Older releases ignore it.
        "telemetry:\n"
        "  shared_metrics:\n"
        "    enabled: false\n"
        "    send: false\n"
        "    offer_version: 2\n"
    )
    if cap:
        config += "max_concurrent_sessions: 64\n"
    (home / "config.yaml").write_text(config, encoding="utf-8")
    workdir = home / "hermes_process.cwd"
    workdir.mkdir(exist_ok=True)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "OPENROUTER_"))}
    env.update(HERMES_HOME=str(home), TERM="xterm-256color", COLUMNS="120", LINES="40",
               NO_COLOR="1")
    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(workdir)
            os.execve(str(hermes), [str(hermes), "chat"], env)
        finally:
            os._exit(127)
    hermes_pid = hermes_pgid = pid
    import fcntl
    import termios
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

    log = open(home / "hermes_process.pty.log", "wb")
    closed = threading.Event()
    screen = {"seen_prompt": False, "last_output": time.monotonic()}

    def pump():
        # Keep the pty drained (hermes blocks on a full terminal) and answer
        # prompt_toolkit's cursor-position requests as a terminal would.
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            log.write(data)
            log.flush()
            screen["last_output"] = time.monotonic()
            if "\u276f".encode() in data:  # the input prompt's marker
                screen["seen_prompt"] = True
            if b"\x1b[6n" in data:
                try:
                    os.write(fd, b"\x1b[40;1R")
                except OSError:
                    pass
        closed.set()

    threading.Thread(target=pump, daemon=True).start()

    def wait_for_prompt(limit, unless=None):
        # Type only once the prompt is drawn and the screen has settled: 0.22 flushes
        # what was typed during startup.
        t = time.monotonic()
        while time.monotonic() - t < limit and not (unless is not None and unless.is_set()):
            if screen["seen_prompt"] and time.monotonic() - screen["last_output"] > 1.0:
                return
            time.sleep(0.1)

    lease = None
    while time.monotonic() - t0 < start_timeout and not stop_requested.is_set():
        lease = lease_of(pid)
        if lease is not None:
            break
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            hermes_pid = None
            print(f"hermes exited before holding a lease (status {status}); see {home / 'hermes_process.pty.log'}",
                  file=sys.stderr)
            return 2
        time.sleep(0.05)
    if lease is None:
        print(f"no lease for pid {pid} after {time.monotonic() - t0:.1f}s", file=sys.stderr)
        return 2
    held_after = time.monotonic() - t0
    print(f"HOLDING {pid} {lease.get('session_id')}", flush=True)
    print(f"hermes_process: lease after {held_after:.2f}s (cap {'64' if cap else 'none'})", file=sys.stderr,
          flush=True)

    if say is not None:
        # One turn through the fake provider while the lease is held.
        requests_log = home / "fake_openai.requests.log"
        wait_for_prompt(30, stop_requested)
        os.write(fd, say.encode())
        time.sleep(0.5)
        os.write(fd, b"\r")
        t2 = time.monotonic()
        posted = False
        while time.monotonic() - t2 < 60 and not stop_requested.is_set():
            if "POST /v1/chat/completions" in requests_log.read_text(encoding="utf-8"):
                posted = True
                break
            time.sleep(0.1)
        time.sleep(2)  # let the reply render
        still = lease_of(pid) is not None
        print(f"SAID {'answered' if posted else 'no-request'} lease-held={'yes' if still else 'no'}", flush=True)

    while not stop_requested.is_set():
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            hermes_pid = None
            gone = lease_of(pid) is None
            print(f"RELEASED {'yes' if gone else 'no'} hermes-exited-by-itself status={status}", flush=True)
            return 0 if gone else 1
        stop_requested.wait(0.2)

    if stop_how in ("eof", "exit"):
        wait_for_prompt(15)
    t1 = time.monotonic()
    if stop_how == "term":
        os.kill(pid, signal.SIGTERM)
    elif stop_how == "int":
        os.kill(pid, signal.SIGINT)
    elif stop_how == "hup":
        os.kill(pid, signal.SIGHUP)
    elif stop_how == "eof":
        os.write(fd, b"\x04")
    elif stop_how == "exit":
        # Typed, then Enter on its own: typed in one write, 0.21.3's prompt takes the
        # Enter into the input instead of submitting it.
        os.write(fd, b"/exit")
        time.sleep(0.5)
        os.write(fd, b"\r")
    how = "killed"
    deadline = t1 + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            hermes_pid = None
            if os.WIFEXITED(status):
                how = f"exit={os.WEXITSTATUS(status)}"
            else:
                how = f"signal={os.WTERMSIG(status)}"
            break
        time.sleep(0.05)
    else:
        print("hermes did not exit within 30s; killing it", file=sys.stderr)
    took = time.monotonic() - t1
    gone = lease_of(pid) is None
    print(f"RELEASED {'yes' if gone else 'no'} stop={stop_how} {how} after {took:.2f}s", flush=True)
    return 0 if gone and how != "killed" else 1


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        cleanup()
    sys.exit(rc)
