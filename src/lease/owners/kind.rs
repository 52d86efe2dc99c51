//! What kind of process owns a lease, from what Hermes records (surface, metadata) and
//! what the process runs (its command line), and the safe way to free a lease it holds
//! for each kind, as Hermes 0.22's code holds leases:
//!
//! - `hermes chat` (cli.py) takes one session's lease when it starts and releases it as it
//!   exits; it never asks the fence again, so removing its lease while it runs lets a
//!   second owner in beside it. Ending it (SIGTERM) is safe: it releases its own lease.
//!   `/new` moves it to another session without moving its lease: a lease whose session
//!   has ended (state.db) names a session it no longer writes.
//! - the messaging gateway (gateway/run_busy.py, `_claim_active_session_slot`) takes a
//!   lease per turn (surface `gateway:<platform>`, metadata platform, chat_id, user_id,
//!   live_session_id = the session key) and releases it when the turn ends; between turns
//!   it holds nothing, and its next turn asks the fence again (its own leftover lease is
//!   taken back as the same writer). A lease with no turn running (state.db's routing row
//!   marks each running turn) is a leftover: removing it is safe. Ending the gateway ends
//!   every chat it serves.
//! - the desktop/TUI backend (tui_gateway: `hermes --tui`, the dashboard, the desktop app)
//!   holds a lease for each session attached to it, from its first turn until the session
//!   closes (or its client has been gone 20 s, or idle 6 h), and drops its own orphaned
//!   leases (no live session of its own holds them) on its reaper's tick. It never reads
//!   the registry again while a session is attached: removing that lease leaves it
//!   writing without one. A session that has ended in state.db is no longer attached.

use crate::lease::format::entry::Entry;

/// What kind of process owns a lease.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum OwnerKind {
    /// `hermes chat`, the classic CLI (or its one-shot `-q`): one session, for its life.
    #[serde(rename = "hermes-chat")]
    Chat,
    /// The messaging gateway: a lease per turn, for one chat of one platform.
    Gateway { platform: String, chat: Option<String> },
    /// The desktop/TUI backend (`hermes --tui`, the dashboard, the desktop app): a lease
    /// per attached session. `surface` as recorded (`tui`, `desktop`).
    AppBackend { surface: String },
    /// leasectl's own `hold` or `run`.
    Leasectl { how: String },
    /// Anything else: another tool, an older Hermes, a surface not known.
    Other,
}

impl OwnerKind {
    /// The kind of `entry`'s owner; `cmdline` is its process's, where it is known (a
    /// live owner on this host).
    pub fn of(entry: &Entry, cmdline: Option<&[String]>) -> OwnerKind {
        let surface = entry.surface().unwrap_or("").trim().to_ascii_lowercase();
        let args = cmdline.unwrap_or_default();
        // What runs decides first: `leasectl hold S --surface gateway` is leasectl.
        if let Some(how) = leasectl_command(args) {
            return OwnerKind::Leasectl { how };
        }
        if let Some(platform) = surface.strip_prefix("gateway:") {
            return gateway(entry, platform);
        }
        if surface == "gateway" || runs_hermes(args, &["gateway"]) {
            return gateway(entry, "");
        }
        if ["tui", "desktop", "dashboard", "bot_room"].contains(&surface.as_str()) || entry.track_liveness() {
            return OwnerKind::AppBackend { surface: if surface.is_empty() { "desktop".into() } else { surface } };
        }
        if args.iter().any(|a| a.contains("tui_gateway")) || runs_hermes(args, &["dashboard", "serve", "--tui"]) {
            return OwnerKind::AppBackend { surface };
        }
        // `cli` is also leasectl's own default surface: a process known to run something
        // else (a script, a `sleep`) is no `hermes chat`.
        let hermes = args.is_empty() || args.iter().take(3).any(|a| base(a) == "hermes" || a.contains("hermes_cli"));
        if (surface == "cli" && hermes) || runs_hermes(args, &["chat"]) {
            return OwnerKind::Chat;
        }
        OwnerKind::Other
    }

    /// For people: `hermes chat`, `gateway: telegram, chat 1234`, `app backend (desktop)`,
    /// `leasectl hold`. Text from the registry is the caller's to escape.
    pub fn describe(&self) -> String {
        match self {
            OwnerKind::Chat => "hermes chat".into(),
            OwnerKind::Gateway { platform, chat } => {
                let platform = if platform.is_empty() { "gateway".to_owned() } else { format!("gateway: {platform}") };
                match chat {
                    Some(chat) => format!("{platform}, chat {chat}"),
                    None => platform,
                }
            }
            OwnerKind::AppBackend { surface } if surface.is_empty() => "app backend".into(),
            OwnerKind::AppBackend { surface } => format!("app backend ({surface})"),
            OwnerKind::Leasectl { how } => format!("leasectl {how}"),
            OwnerKind::Other => "other".into(),
        }
    }

    /// In a sentence: `hermes chat`, `gateway (telegram, chat 1234)`, `app backend
    /// (desktop)`, `leasectl hold`.
    pub fn noun(&self) -> String {
        match self {
            OwnerKind::Gateway { platform, chat } => {
                let mut about: Vec<String> = Vec::new();
                if !platform.is_empty() {
                    about.push(platform.clone());
                }
                if let Some(chat) = chat {
                    about.push(format!("chat {chat}"));
                }
                match about.is_empty() {
                    true => "gateway".into(),
                    false => format!("gateway ({})", about.join(", ")),
                }
            }
            other => other.describe(),
        }
    }

    /// The process rather than one of its leases: a gateway without the chat.
    pub fn process(&self) -> OwnerKind {
        match self {
            OwnerKind::Gateway { platform, .. } => OwnerKind::Gateway { platform: platform.clone(), chat: None },
            other => other.clone(),
        }
    }

    /// Whether one process of this kind serves many sessions by design (every chat of a
    /// gateway, every session attached to an app).
    pub fn serves_many(&self) -> bool {
        matches!(self, OwnerKind::Gateway { .. } | OwnerKind::AppBackend { .. })
    }
}

/// A gateway's lease: its platform from the surface or `metadata.platform`, its chat
/// from `metadata.chat_id`.
fn gateway(entry: &Entry, from_surface: &str) -> OwnerKind {
    // Parsed only when it can hold what is read: a listing of 10,000 leases with a bare
    // `gateway` surface parsed each entry for nothing.
    let text = entry.text();
    let wanted = text.contains("\"chat_id\"") || (from_surface.is_empty() && text.contains("\"platform\""));
    let metadata =
        if wanted { entry.fields().get("metadata").cloned().unwrap_or_default() } else { Default::default() };
    let word = |key: &str| match metadata.get(key) {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let platform = match from_surface {
        "" => word("platform").unwrap_or_default(),
        p => p.to_owned(),
    };
    OwnerKind::Gateway { platform, chat: word("chat_id") }
}

/// `hold` or `run` when `args` run leasectl's.
fn leasectl_command(args: &[String]) -> Option<String> {
    let program = args.first().map(|a| base(a))?;
    if program != "leasectl" {
        return None;
    }
    args.iter().skip(1).find(|a| *a == "hold" || *a == "run").cloned()
}

/// Whether `args` run Hermes (`hermes …`, or a python running its script) with one of
/// `words` among its arguments.
fn runs_hermes(args: &[String], words: &[&str]) -> bool {
    let Some(at) = args.iter().take(3).position(|a| base(a) == "hermes") else { return false };
    args.iter().skip(at + 1).any(|a| words.contains(&a.as_str()))
}

fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The safe way to free a lease, for its owner's kind and what state.db says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SafeMove {
    /// End the process: it holds this session alone and releases its lease as it ends.
    Stop,
    /// Remove the lease alone: the owner does not write its session now (a gateway
    /// between turns: its next turn asks the fence again; an app backend or a chat whose
    /// session has ended).
    ForceRelease,
    /// Wait: a gateway's turn runs for this chat; its lease goes when the turn ends.
    WaitForTurn,
    /// Close the session where it is open: ending the process ends every session it
    /// serves, and removing the lease leaves it writing without one.
    CloseWhereOpen,
}

/// What is known of a lease's owner when advice is given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Situation {
    /// For a gateway's lease: whether state.db marks a turn running for its chat (None:
    /// not known, no routing row read).
    pub gateway_turn: Option<bool>,
    /// The lease was taken longer ago than a turn takes to mark itself.
    pub past_turn_grace: bool,
    /// Its session has ended in state.db.
    pub session_ended: bool,
    /// How many sessions its process holds, in every registry read.
    pub sessions_held: usize,
}

impl Situation {
    /// `entry`'s situation as state.db's `ctx` says, judged at `now`; its process holds
    /// `sessions_held` sessions.
    pub fn of(
        entry: &Entry,
        ctx: Option<crate::lease::home::context::ContextRef<'_>>,
        sessions_held: usize,
        now: f64,
    ) -> Situation {
        let taken = entry.started_at().unwrap_or(now);
        Situation {
            gateway_turn: ctx.and_then(|c| c.gateway_turn()),
            past_turn_grace: now - taken > crate::lease::home::context::TURN_GRACE.as_secs_f64(),
            session_ended: ctx.is_some_and(|c| c.ended_at().is_some()),
            sessions_held,
        }
    }
}

/// The safe move for a lease whose owner is of `kind`, as things stand.
pub fn safe_move(kind: &OwnerKind, s: Situation) -> SafeMove {
    match kind {
        OwnerKind::Gateway { .. } => match (s.gateway_turn, s.past_turn_grace) {
            (Some(false), true) => SafeMove::ForceRelease,
            _ => SafeMove::WaitForTurn,
        },
        OwnerKind::AppBackend { .. } | OwnerKind::Chat if s.session_ended => SafeMove::ForceRelease,
        OwnerKind::AppBackend { .. } => SafeMove::CloseWhereOpen,
        OwnerKind::Chat | OwnerKind::Leasectl { .. } => SafeMove::Stop,
        OwnerKind::Other if s.sessions_held <= 1 => SafeMove::Stop,
        // Of many, one whose session has ended is the one it no longer uses.
        OwnerKind::Other if s.session_ended => SafeMove::ForceRelease,
        OwnerKind::Other => SafeMove::CloseWhereOpen,
    }
}

/// A lease's owner as advice needs it: its kind, what state.db says, and the safe move.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OwnerMove {
    pub kind: OwnerKind,
    pub situation: Situation,
    pub safe: SafeMove,
}

impl OwnerMove {
    /// For `view` (its owner's command line `cmdline`, where known), as state.db's `ctx`
    /// says at `now`; its process holds `sessions_held` sessions.
    pub fn of(
        view: &crate::lease::view::LeaseView,
        ctx: Option<crate::lease::home::context::ContextRef<'_>>,
        sessions_held: usize,
        cmdline: Option<&[String]>,
        now: f64,
    ) -> OwnerMove {
        let kind = OwnerKind::of(&view.entry, cmdline);
        let situation = Situation::of(&view.entry, ctx, sessions_held, now);
        OwnerMove { safe: safe_move(&kind, situation), kind, situation }
    }
}

/// How many leases each live owner (pid and start time) holds, counted over every listing
/// read: a gateway's chats, an app's sessions, in every profile read. Dead owners are
/// not counted (each would be an entry: 15,000 dead pids were 1 MB of an `ls`).
#[derive(Debug, Clone, Default)]
pub struct Holdings(std::collections::HashMap<(u64, Option<u64>), usize>);

impl Holdings {
    pub fn of<'a>(views: impl IntoIterator<Item = &'a crate::lease::view::LeaseView>) -> Holdings {
        let mut held = Holdings::default();
        held.add(views);
        held
    }

    pub fn add<'a>(&mut self, views: impl IntoIterator<Item = &'a crate::lease::view::LeaseView>) {
        for v in views.into_iter().filter(|v| crate::lease::view::owner_may_be_alive(v)) {
            *self.0.entry(owner_of(v)).or_default() += 1;
        }
    }

    /// How many the owner of `v` holds (at least its own).
    pub fn of_owner(&self, v: &crate::lease::view::LeaseView) -> usize {
        self.0.get(&owner_of(v)).copied().unwrap_or(0).max(1)
    }
}

fn owner_of(v: &crate::lease::view::LeaseView) -> (u64, Option<u64>) {
    (v.entry.pid(), v.entry.process_start_time().map(f64::to_bits))
}

/// A gateway's lease removed alone is safe: no turn runs for its chat (state.db's
/// routing row says so) and it is older than a turn takes to mark itself.
pub fn gateway_leftover(entry: &Entry, turn: Option<bool>, now: f64) -> bool {
    let taken = entry.started_at().unwrap_or(now);
    matches!(OwnerKind::of(entry, None), OwnerKind::Gateway { .. })
        && turn == Some(false)
        && now - taken > crate::lease::home::context::TURN_GRACE.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(surface: &str, metadata: &str, track: bool) -> Entry {
        let track = if track { r#", "track_liveness": true"# } else { "" };
        let text = format!(
            r#"{{"lease_id": "l", "session_id": "s", "surface": "{surface}", "pid": 7, "process_start_time": 1.0, "started_at": 1.0, "updated_at": 1.0{track}, "metadata": {metadata}}}"#
        );
        Entry::from_text(0, &text, &std::collections::HashSet::<String>::new()).expect("an entry")
    }

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn each_kind_is_known_from_the_entry_and_the_command_line() {
        let gw = entry("gateway:telegram", r#"{"platform": "telegram", "chat_id": "1234", "user_id": "9"}"#, false);
        let kind = OwnerKind::of(&gw, None);
        assert_eq!(kind.describe(), "gateway: telegram, chat 1234");
        let sent = serde_json::to_value(&kind).expect("json");
        assert_eq!(sent["kind"], "gateway", "{sent}");
        assert_eq!(serde_json::to_value(OwnerKind::Chat).expect("json")["kind"], "hermes-chat");
        let desktop = entry("desktop", r#"{"live_session_id": "r1"}"#, true);
        assert_eq!(OwnerKind::of(&desktop, None).describe(), "app backend (desktop)");
        let tui = entry("tui", r#"{"live_session_id": "r1"}"#, false);
        assert!(matches!(OwnerKind::of(&tui, None), OwnerKind::AppBackend { .. }));
        let cli = entry("cli", "{}", false);
        assert_eq!(OwnerKind::of(&cli, None), OwnerKind::Chat);
        // What runs decides first.
        let hold = args(&["/usr/bin/leasectl", "hold", "S", "--surface", "gateway"]);
        assert_eq!(OwnerKind::of(&gw, Some(&hold)).describe(), "leasectl hold");
        let gateway_run = args(&["/venv/bin/python", "/venv/bin/hermes", "gateway", "run"]);
        assert!(matches!(OwnerKind::of(&entry("x", "{}", false), Some(&gateway_run)), OwnerKind::Gateway { .. }));
        let chat = args(&["/venv/bin/python3", "/venv/bin/hermes", "chat"]);
        assert_eq!(OwnerKind::of(&entry("", "{}", false), Some(&chat)), OwnerKind::Chat);
        let dashboard = args(&["/venv/bin/python", "/venv/bin/hermes", "dashboard"]);
        assert!(matches!(OwnerKind::of(&entry("", "{}", false), Some(&dashboard)), OwnerKind::AppBackend { .. }));
        assert_eq!(OwnerKind::of(&entry("script", "{}", false), Some(&args(&["python3", "x.py"]))), OwnerKind::Other);
        // `cli` from a process that is not Hermes (leasectl's default surface): other.
        assert_eq!(OwnerKind::of(&cli, Some(&args(&["sleep", "30"]))), OwnerKind::Other);
        assert_eq!(OwnerKind::of(&cli, Some(&args(&["/v/bin/python", "/v/bin/hermes"]))), OwnerKind::Chat);
    }

    #[test]
    fn the_safe_move_follows_the_kind_and_what_state_db_says() {
        let gw = OwnerKind::Gateway { platform: "telegram".into(), chat: None };
        let between = Situation { gateway_turn: Some(false), past_turn_grace: true, ..Situation::default() };
        assert_eq!(safe_move(&gw, between), SafeMove::ForceRelease);
        let young = Situation { past_turn_grace: false, ..between };
        assert_eq!(safe_move(&gw, young), SafeMove::WaitForTurn, "a turn may not have marked itself yet");
        let turn = Situation { gateway_turn: Some(true), ..between };
        assert_eq!(safe_move(&gw, turn), SafeMove::WaitForTurn);
        let unknown = Situation { gateway_turn: None, ..between };
        assert_eq!(safe_move(&gw, unknown), SafeMove::WaitForTurn, "no routing row read: never a guess");
        let app = OwnerKind::AppBackend { surface: "desktop".into() };
        assert_eq!(safe_move(&app, Situation::default()), SafeMove::CloseWhereOpen);
        let ended = Situation { session_ended: true, ..Situation::default() };
        assert_eq!(safe_move(&app, ended), SafeMove::ForceRelease);
        assert_eq!(
            safe_move(&OwnerKind::Chat, Situation::default()),
            SafeMove::Stop,
            "a chat never asks the fence again"
        );
        assert_eq!(safe_move(&OwnerKind::Chat, ended), SafeMove::ForceRelease, "a chat that moved on (/new)");
        let many = Situation { sessions_held: 3, ..Situation::default() };
        assert_eq!(safe_move(&OwnerKind::Other, many), SafeMove::CloseWhereOpen);
        assert_eq!(safe_move(&OwnerKind::Other, Situation { sessions_held: 1, ..many }), SafeMove::Stop);
    }
}
