# usage: HERMES_HOME=DIR python hold.py SESSION_ID [SURFACE]
import signal, sys
from hermes_constants import get_hermes_home
from hermes_cli.active_sessions import try_acquire_active_session
from utils import fast_safe_load  # Hermes' YAML reader; hermes_cli.config would scaffold HERMES_HOME on 0.21+
sid = sys.argv[1]
surface = sys.argv[2] if len(sys.argv) > 2 else "cli"
try:
    with open(get_hermes_home() / "config.yaml", encoding="utf-8-sig") as fh:
        config = fast_safe_load(fh) or {}
except FileNotFoundError:
    config = {}
lease, refusal = try_acquire_active_session(
    session_id=sid, surface=surface, config=config,
    metadata={"live_session_id": sid})
if lease is None:
    print(f"hermes-refusal-reason: {getattr(refusal, 'reason', '')}\n{refusal}", file=sys.stderr)
    sys.exit(3)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # SIGTERM -> SystemExit -> finally
print(f"ACQUIRED {lease.lease_id} recorded={lease.enabled}", flush=True)
try:
    while True:
        signal.pause()
finally:
    lease.release()
