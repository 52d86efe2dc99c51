//! The safe move for a lease, in words, with the command that makes it: one wording for
//! every place that advises (a refusal, `doctor`, `ls`, the console's dialogs, `stop`).

use crate::lease::owners::kind::{OwnerKind, OwnerMove, SafeMove, Situation};

/// [`advise`] for an owner judged as `m`.
pub fn advise_move(m: &OwnerMove, lease_id: &str, pid: u64, cmd: &dyn Fn(&[&str]) -> String) -> String {
    advise(&m.kind, m.safe, m.situation, lease_id, pid, cmd)
}

/// What to do about lease `lease_id` (held by pid `pid`, an owner of `kind`): `mv`, as
/// `s` explains, each command made by `cmd` as it is shown (a caller's hint maker, the
/// backticks its own: the profile, the home, quoting). Text from the registry in it is escaped.
pub fn advise(
    kind: &OwnerKind,
    mv: SafeMove,
    s: Situation,
    lease_id: &str,
    pid: u64,
    cmd: &dyn Fn(&[&str]) -> String,
) -> String {
    let who = super::human::escape(&kind.noun()).into_owned();
    let stop = cmd(&["stop", lease_id]);
    // What ending the process costs, where it serves more than this session.
    let ends = match s.sessions_held.saturating_sub(1) {
        0 => None,
        n => Some(format!(
            "would end pid {pid} and with it {}",
            crate::lease::words::human::plural(n, "other session", "other sessions")
        )),
    };
    let stop_costs = ends.as_ref().map(|e| format!(" {stop} {e}.")).unwrap_or_default();
    match (mv, kind) {
        (SafeMove::Stop, OwnerKind::Chat) => format!(
            "pid {pid} is a hermes chat: it holds this session alone and never asks the fence again, so removing its \
             lease would leave it writing beside the next owner. End it: {stop} (it releases its own lease)"
        ),
        (SafeMove::Stop, OwnerKind::Leasectl { .. }) => {
            format!("pid {pid} is {who}: end it with {stop} (it releases its lease as it ends)")
        }
        (SafeMove::Stop, _) => format!(
            "pid {pid} holds this session alone: end it with {stop}; {} only once you know it no longer writes",
            cmd(&["force-release", lease_id, "--live"])
        ),
        (SafeMove::ForceRelease, OwnerKind::Gateway { .. }) => format!(
            "the {who} runs no turn for this chat (state.db's routing row marks none), so its lease was left \
             behind; the gateway's next turn for this chat asks the fence again. Remove the lease alone: {}.{}",
            cmd(&["force-release", lease_id]),
            ends.as_ref().map(|e| format!(" Stopping the gateway instead ({stop}) {e}.")).unwrap_or_default()
        ),
        (SafeMove::ForceRelease, OwnerKind::Chat) => format!(
            "its session has ended (state.db): pid {pid}, a hermes chat, has moved on to another session (`/new` keeps \
             the first session's lease) and no longer writes this one. Remove the lease alone: {}; ending the chat \
             ({stop}) would end the session it is in now.",
            cmd(&["force-release", lease_id, "--live"])
        ),
        (SafeMove::ForceRelease, OwnerKind::Other | OwnerKind::Leasectl { .. }) => format!(
            "its session has ended (state.db), and pid {pid} holds {} besides: it no longer uses this one, as far as \
             state.db tells. Remove the lease alone: {}.{stop_costs}",
            crate::lease::words::human::plural(s.sessions_held.saturating_sub(1), "other session", "other sessions"),
            cmd(&["force-release", lease_id, "--live"])
        ),
        (SafeMove::ForceRelease, _) => format!(
            "its session has ended (state.db), so the {who} no longer has it attached, and it claims anew when the \
             session is resumed (its own reaper drops such a lease too). Remove the lease alone: {}.{stop_costs}",
            cmd(&["force-release", lease_id, "--live"])
        ),
        (SafeMove::WaitForTurn, _) => {
            let why = match (s.gateway_turn, s.past_turn_grace) {
                (Some(true), _) => "a turn runs for this chat now (state.db marks it)",
                (Some(false), false) => "its lease is under a minute old: a turn may be starting",
                _ => "state.db has no routing row for this chat, so a running turn cannot be ruled out",
            };
            format!(
                "pid {pid} is the {who}: {why}, and the gateway releases the lease when the turn ends. Wait for it; \
                 removing the lease mid-turn would let a second owner in.{stop_costs}"
            )
        }
        (SafeMove::CloseWhereOpen, OwnerKind::AppBackend { .. }) => format!(
            "pid {pid} is the {who}, which holds a lease for each session attached to it and does not ask the fence \
             again while it is attached: close the session in the app (its lease goes with it; a client gone for 20 s \
             or idle for 6 h is closed by the backend itself). Removing the lease would leave the app writing without \
             one.{stop_costs}"
        ),
        (SafeMove::CloseWhereOpen, _) => format!(
            "pid {pid} holds {}: close this one where it is open. Removing the lease alone leaves the process writing \
             without one.{stop_costs}",
            crate::lease::words::human::plural(s.sessions_held, "session", "sessions")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> String {
        format!("`leasectl {}`", args.join(" "))
    }

    #[test]
    fn each_move_names_its_command_and_what_the_other_costs() {
        let gw = OwnerKind::Gateway { platform: "telegram".into(), chat: Some("1234".into()) };
        let s = Situation { gateway_turn: Some(false), past_turn_grace: true, session_ended: false, sessions_held: 3 };
        let said = advise(&gw, SafeMove::ForceRelease, s, "abcd", 42, &cmd);
        assert!(said.contains("`leasectl force-release abcd`") && !said.contains("--live"), "{said}");
        assert!(said.contains("the gateway (telegram, chat 1234) runs no turn"), "{said}");
        assert!(
            said.contains(
                "Stopping the gateway instead (`leasectl stop abcd`) would end pid 42 and with it 2 other sessions."
            ),
            "{said}"
        );
        let turn = Situation { gateway_turn: Some(true), ..s };
        let said = advise(&gw, SafeMove::WaitForTurn, turn, "abcd", 42, &cmd);
        assert!(said.contains("a turn runs for this chat now") && !said.contains("force-release"), "{said}");
        let said = advise(&OwnerKind::Chat, SafeMove::Stop, Situation::default(), "abcd", 42, &cmd);
        assert!(said.contains("`leasectl stop abcd`") && !said.contains("force-release"), "{said}");
        let app = OwnerKind::AppBackend { surface: "desktop".into() };
        let said = advise(&app, SafeMove::CloseWhereOpen, s, "abcd", 42, &cmd);
        assert!(said.contains("close the session in the app") && said.contains("2 other sessions"), "{said}");
    }
}
