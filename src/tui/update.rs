//! Events in, state changes and effects out. No I/O here: the worker does it.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::diff::diff;
use super::event::LogLevel;
use super::event::{ActionDone, ActionOutcome, Effect, Event, LeaseRow, Loaded};
use super::extension::KeyContext;
use super::keys::{
    self, Action, Answer, CONFIRM_KEYS, CONSOLE_KEYS, Edit, FILTER_KEYS, FORCE_KEYS, HELP_KEYS, LINE_KEYS, SCROLL_KEYS,
    lookup, typed_char,
};
use super::state::{App, Dialog, Mode};
use crate::lease::view::may_be_alive;
use crate::lease::words::human::plural;
use crate::lease::{Liveness, Target};

pub fn update(app: &mut App, event: Event) -> Vec<Effect> {
    match event {
        Event::Key(key) => on_key(app, key),
        Event::Resize(w, h) => {
            app.size = (w, h);
            vec![]
        }
        Event::Mouse(m) => super::mouse::on_mouse(app, m).into_iter().flat_map(|key| on_key(app, key)).collect(),
        // No paths: directories came or went, or the watcher lost track; read everything.
        Event::FsChanged(paths) if !paths.is_empty() => vec![Effect::ReloadChanged(paths)],
        Event::FsChanged(_) => vec![Effect::Reload],
        Event::FeedArmed => vec![Effect::ReloadStale],
        Event::RemoteChanged(changes) => {
            log_remote(app, &changes);
            vec![Effect::Reload]
        }
        Event::Tick(at) => {
            app.now = at;
            app.ticks += 1;
            vec![Effect::Relive]
        }
        Event::Loaded(loaded) => {
            on_loaded(app, loaded);
            vec![]
        }
        Event::ActionDone(done) => {
            on_action_done(app, done);
            vec![Effect::Reload]
        }
        Event::Extension(done) => {
            if let Some(ext) = app.extension.as_mut() {
                let name = ext.name();
                let lines = ext.on_done(done);
                let focus = ext.focus_lease().map(str::to_owned);
                for (level, text) in lines {
                    app.log(name, level, text);
                }
                // The lease the job was about comes into view, selected (its details one Enter away).
                if let Some(id) = focus {
                    app.select_lease(&id);
                }
            }
            vec![]
        }
        Event::RepairPlanned { location, result, needs_force } => {
            match result {
                Ok(lines) => app.dialog = Some(Dialog::ConfirmRepair { location, lines, needs_force }),
                Err(e) => {
                    let why = crate::lease::words::hint::hinted(&location, &e.to_string());
                    app.log(&location.label(), LogLevel::Warn, format!("repair refused: {why}"))
                }
            }
            vec![]
        }
        Event::StopPlanned { location, result } => {
            match result {
                Ok(plan) => app.dialog = Some(Dialog::ConfirmStop { location, plan, again: false }),
                Err(e) => {
                    let why = crate::lease::words::hint::hinted(&location, &e.to_string());
                    app.log(&location.label(), LogLevel::Warn, format!("stop refused: {why}"))
                }
            }
            vec![]
        }
        Event::History(history) => {
            app.prepend_history(history);
            vec![]
        }
        Event::Retrying(hosts) => {
            let text = format!("trying again now: {}", hosts.join(", "));
            app.log("", LogLevel::Info, text);
            vec![]
        }
        Event::Shutdown => {
            app.quit = true;
            vec![Effect::Quit]
        }
    }
}

/// etcd's watch events in the log, each once and in order, named as their enders marked
/// them: a lease acquired and released between two readings shows too, and one nobody
/// ended is `expired` (not "pruned" after an outage). The readings' comparison says only
/// what the watch cannot: owners dying on this host.
fn log_remote(app: &mut App, changes: &[crate::lease::RemoteChange]) {
    use crate::lease::{Ending, RemoteChange};
    let Some(profile) = app.registries.iter().find(|r| r.location.is_remote()).map(|r| r.location.label()) else {
        return;
    };
    for change in changes {
        let who = |v: &crate::lease::LeaseView| {
            let e = &v.entry;
            let id: String = e.lease_id().chars().take(8).collect();
            format!("session {} ({}, pid {}, lease {id})", e.session_id(), e.surface().unwrap_or("-"), e.pid())
        };
        let text = match change {
            RemoteChange::Put { view, created: true, .. } => format!("acquired: {}", who(view)),
            RemoteChange::Put { .. } | RemoteChange::Line { .. } => continue,
            RemoteChange::Deleted { view, ended, .. } => {
                // This console's own removal: its action's line says it (the watch's event
                // can come before the action's answer, so the mark's pid tells).
                let me = format!("(pid {})", std::process::id());
                let by_me = matches!(ended, Ending::ForceReleased { by } | Ending::Stopped { by } | Ending::Pruned { by } if by.ends_with(&me));
                if app.was_removed_here(view.entry.lease_id()) || by_me {
                    continue;
                }
                match ended {
                    Ending::Released => format!("released: {}", who(view)),
                    Ending::ForceReleased { by } => format!("force-released: {} — by {by}", who(view)),
                    Ending::Stopped { by } => format!("stopped: {} — its owner ended by {by}", who(view)),
                    Ending::Pruned { by } => format!("pruned: {} — by {by}", who(view)),
                    Ending::Expired => format!("expired: {} — its etcd lease ran out", who(view)),
                }
            }
            RemoteChange::Resync => {
                "gap: etcd's watch lost history; what changed meanwhile is not in this log".to_owned()
            }
        };
        app.log(&profile, LogLevel::Change, text);
    }
}

fn on_loaded(app: &mut App, loaded: Loaded) {
    app.now = loaded.at;
    if let Some(owners) = &loaded.owners_moved {
        for r in &mut app.registries {
            r.owners_moved(owners, &app.host);
        }
    }
    // New profiles are added after the others, so every profile's tab keeps its place;
    // only "all" (always last) moves, and the operator on it stays on it.
    let on_all = app.has_all_tab() && app.tab >= app.registries.len();
    // Registries first read here beyond the ones named one by one, and their leases.
    let mut unsaid = (0usize, 0usize);
    for (i, snap) in loaded.snapshots.iter().enumerate() {
        // Snapshots come in tab order from `first`: the same place first (a scan of 100,000
        // tabs for each of 100,000 snapshots took minutes), else wherever it is.
        let place = loaded.first + i;
        let at_place = app.registries.get(place).is_some_and(|r| r.location == snap.location);
        let found = if at_place { Some(place) } else { app.position(&snap.location) };
        let mut created_since = false;
        let index = match found {
            Some(i) => i,
            None => {
                let index = app.add_registry(snap.location.clone());
                // Profiles found by the first read were there before: each gets its
                // "watching" line below, like the ones the console opened with. So do a
                // host's (they come as it answers, new or not).
                if !loaded.initial && snap.location.host().is_none() {
                    let profile = snap.location.label();
                    app.log(&profile, LogLevel::Info, format!("new profile: {}", snap.location.describe()));
                    created_since = true;
                }
                index
            }
        };
        // One made since the console opened is news: always named.
        if !app.registries[index].loaded && !created_since && app.watching_said >= super::state::WATCHING_LINES {
            unsaid.0 += 1;
            unsaid.1 += snap.leases.as_ref().map_or(0, Vec::len);
        } else if !app.registries[index].loaded {
            let place = snap.location.describe();
            let what = match &snap.leases {
                Ok(l) => format!("watching {place} ({})", plural(l.len(), "lease", "leases")),
                Err(_) => format!("watching {place}"),
            };
            let profile = snap.location.label();
            app.log(&profile, LogLevel::Info, what);
            app.watching_said += 1;
        }
        // A profile created since the console started: every lease it holds was acquired
        // since, and is said so (as `ls -w`, `events` and the recorder say it).
        let changes =
            if created_since { super::diff::acquired_in_new(snap) } else { diff(&app.registries[index], snap) };
        let profile = app.registries[index].location.label();
        // A lease this console removed is said too, as every surface says it (by whom):
        // the action's own line says what it did, this one what the registry shows.
        for c in changes {
            if let Some(id) = c.gone.as_deref() {
                app.was_removed_here(id);
            }
            app.log(&profile, c.level, c.text);
        }
        app.registries[index].apply(snap, loaded.at);
        app.registries[index].sample(app.ticks + 1);
    }
    if unsaid.0 > 0 {
        let (registries, leases) =
            (plural(unsaid.0, "more registry", "more registries"), plural(unsaid.1, "lease", "leases"));
        app.log("all", LogLevel::Info, format!("watching {registries} ({leases}); each has its tab"));
    }
    // A first read of a thousand registries or more takes seconds: its end is said.
    if loaded.initial && loaded.large_read_done {
        app.log(
            "all",
            LogLevel::Info,
            format!("first read done: {}", plural(app.registries.len(), "registry", "registries")),
        );
    }
    app.order_host_tabs();
    if on_all {
        app.tab = app.registries.len();
    }
    app.clamp_selection();
}

fn on_action_done(app: &mut App, done: ActionDone) {
    let profile = done.location.label();
    if let Some(r) = app.registries.iter_mut().find(|r| r.location == done.location) {
        r.locked_by = done.lock_holder();
    }
    for failure in &done.audit_failures {
        app.log(&profile, LogLevel::Warn, format!("audit: {failure} (the {} stands)", done.what));
    }
    match done.result {
        Ok(ActionOutcome::Repaired(summary)) => app.log(&profile, LogLevel::Change, format!("repair: {summary}")),
        Ok(ActionOutcome::Stopped(stopped)) => {
            for owner in &stopped.owners {
                for l in &owner.leases {
                    app.ending.remove(l.view.entry.lease_id());
                    if l.how != crate::lease::stop::LeaseEnd::Left {
                        app.removed_here(l.view.entry.lease_id());
                    }
                }
                let ended = owner.ending.ended();
                let level = if ended { LogLevel::Change } else { LogLevel::Warn };
                app.log(&profile, level, format!("{}: {}", done.what, crate::lease::stop::said(owner)));
            }
            for w in &stopped.warnings {
                app.log(&profile, LogLevel::Warn, format!("{}: {w}", done.what));
            }
            for line in &stopped.elsewhere {
                app.log(&profile, LogLevel::Change, format!("{}: {line}", done.what));
            }
        }
        Ok(ActionOutcome::Removed(removal)) => {
            if !removal.dry_run {
                for v in &removal.removed {
                    app.removed_here(v.entry.lease_id());
                }
            }
            let ids: Vec<String> =
                removal.removed.iter().map(|v| v.entry.lease_id().chars().take(8).collect()).collect();
            let warn = if removal.live_owner { " (a LIVE owner's lease: it may keep writing)" } else { "" };
            let level = if removal.live_owner { LogLevel::Warn } else { LogLevel::Change };
            app.log(
                &profile,
                level,
                format!("{}: removed {} {}{warn}", done.what, plural(ids.len(), "lease", "leases"), ids.join(" ")),
            );
        }
        Err(e) => {
            if done.what.starts_with("stop ") {
                app.ending.clear();
            }
            let why = crate::lease::words::hint::hinted(&done.location, &e.to_string());
            app.log(&profile, LogLevel::Warn, format!("{} refused: {why}", done.what))
        }
    }
}

fn is_ctrl_c(key: &KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c')
}

fn on_key(app: &mut App, key: KeyEvent) -> Vec<Effect> {
    if key.kind == KeyEventKind::Release {
        return vec![];
    }
    if is_ctrl_c(&key) {
        app.quit = true;
        return vec![Effect::Quit];
    }
    // A window too small to show the console shows a note only: a key must not act on
    // what nobody can see (a prune confirmed blind, a tour step started unseen). `q` quits.
    // (A size of 0x0 is one not known yet.)
    let screen = ratatui::layout::Rect::new(0, 0, app.size.0, app.size.1);
    if app.size != (0, 0) && super::layout::too_small(app, screen).is_some() {
        return on_key_too_small(app, key);
    }
    match app.mode() {
        Mode::Dialog => {
            let effects = on_dialog_key(app, key);
            if app.dialog.is_none() {
                app.dialog_scroll = 0;
            }
            return effects;
        }
        Mode::Filter => {
            on_filter_key(app, &key);
            return vec![];
        }
        Mode::TabName => {
            on_tab_name_key(app, &key);
            return vec![];
        }
        Mode::Log | Mode::Table => {}
    }
    if let Some(effects) = extension_key(app, &key) {
        return effects;
    }
    let Some(action) = lookup(CONSOLE_KEYS, &key) else {
        app.clamp_selection();
        return vec![];
    };
    let on_log = app.mode() == Mode::Log;
    if on_log && scroll_log(app, action) {
        return vec![];
    }
    // Enter on the focused log opens the line at its foot whole.
    if on_log && action == Action::ToggleDetails {
        let newest = app.log.len().saturating_sub(1 + app.log_scroll);
        if let Some(l) = app.log.get(newest) {
            app.dialog = Some(Dialog::LogLine { at: l.at, profile: l.profile.clone(), text: l.text.clone() });
            app.dialog_scroll = 0;
        }
        return vec![];
    }
    let selected = app.selected;
    let effects = on_action(app, action);
    app.clamp_selection();
    if app.selected != selected {
        app.details_scroll = 0;
    }
    effects
}

/// A tab's name being typed (`T`): each key jumps to the first tab it names; Enter stays
/// there, Esc goes back to the tab it started from.
fn on_tab_name_key(app: &mut App, key: &KeyEvent) {
    let Some(mut input) = app.tab_input.take() else { return };
    match lookup(LINE_KEYS, key) {
        Some(Edit::Done) => return,
        Some(Edit::Cancel) => {
            app.tab = input.from;
            app.selected = 0;
            return;
        }
        Some(Edit::Erase) => {
            input.typed.pop();
        }
        None => {
            if let Some(c) = typed_char(key) {
                input.typed.push(c);
            }
        }
    }
    let found = app.tab_named(&input.typed);
    input.found = found.is_some() || input.typed.is_empty();
    if let Some(tab) = found {
        app.tab = tab;
        app.selected = 0;
    }
    app.tab_input = Some(input);
}

/// The filter being typed: Enter keeps it, Esc clears it, other keys edit it. Opened on
/// a filter in force, its text is selected: typing replaces it, Backspace edits it.
fn on_filter_key(app: &mut App, key: &KeyEvent) {
    let Some(input) = app.filter_input.as_mut() else { return };
    let selected = std::mem::take(&mut app.filter_selected);
    match lookup(FILTER_KEYS, key) {
        Some(Edit::Done) => {
            app.filter = app.filter_input.take().unwrap_or_default();
            app.selected = 0;
        }
        Some(Edit::Cancel) => {
            app.filter_input = None;
            app.filter.clear();
        }
        Some(Edit::Erase) => {
            input.pop();
        }
        None => {
            let typed = typed_char(key);
            if selected && typed.is_some() {
                input.clear();
            }
            app.filter_selected = selected && typed.is_none();
            input.extend(typed);
        }
    }
}

/// The furthest the details scroll (the view stops at their end).
const DETAILS_MAX: usize = 200;

/// Rows moved by a page of the table or the log.
const PAGE: usize = 10;

/// The event log has the moving keys while it has the focus; `log_scroll` counts lines
/// up from the newest. False when `action` does not move.
fn scroll_log(app: &mut App, action: Action) -> bool {
    let newest_up = app.log.len().saturating_sub(1);
    let scroll = app.log_scroll;
    let moved = match action {
        Action::Up => scroll.saturating_add(1),
        Action::Down => scroll.saturating_sub(1),
        Action::PageUp => scroll.saturating_add(PAGE),
        Action::PageDown => scroll.saturating_sub(PAGE),
        Action::First => newest_up,
        Action::Last => 0,
        _ => return false,
    };
    app.log_scroll = moved.min(newest_up);
    true
}

/// What one of the console's own keys does.
fn on_action(app: &mut App, action: Action) -> Vec<Effect> {
    match action {
        Action::Quit => {
            app.quit = true;
            return vec![Effect::Quit];
        }
        Action::FocusLog => {
            app.log_focus = !app.log_focus;
            app.log_scroll = 0;
        }
        Action::Back => back(app),
        Action::Down => app.selected = app.selected.saturating_add(1),
        Action::Up => app.selected = app.selected.saturating_sub(1),
        Action::PageDown => app.selected = app.selected.saturating_add(PAGE),
        Action::PageUp => app.selected = app.selected.saturating_sub(PAGE),
        Action::First => app.selected = 0,
        Action::Last => app.selected = usize::MAX,
        Action::NextTab | Action::PreviousTab => {
            let n = app.tab_count().max(1);
            let step = if action == Action::NextTab { 1 } else { n - 1 };
            app.tab = (app.tab + step) % n;
            app.selected = 0;
        }
        Action::ToggleDetails => app.show_details = !app.show_details,
        Action::Filter => {
            app.filter_input = Some(app.filter.clone());
            app.filter_selected = !app.filter.is_empty();
        }
        Action::GoToTab => {
            app.tab_input = Some(super::state::TabInput { typed: String::new(), from: app.tab, found: true })
        }
        Action::Sort => {
            app.sort = app.sort.next();
            app.sort_reverse = false;
        }
        Action::SortBy(mode) => {
            app.sort_reverse = app.sort == mode && !app.sort_reverse;
            app.sort = mode;
        }
        Action::SortColumn(n) => {
            // The columns as the table shows them at this size: a hidden one is not sorted
            // by unseen (at 80 columns 7 was the live id, which was not on screen).
            let screen = ratatui::layout::Rect::new(0, 0, app.size.0, app.size.1);
            let banner = super::view::banner_height(&super::view::banner_lines(app), screen.width);
            let table = super::layout::areas(app, screen, banner).table;
            // A size not known yet (0x0): every column, as on a wide terminal.
            let width = if app.size == (0, 0) { u16::MAX } else { table.width.saturating_sub(2) };
            let shown = super::view::sort_modes_shown(app, width);
            match shown.get(n.saturating_sub(1)) {
                Some(&mode) => {
                    app.sort_reverse = app.sort == mode && !app.sort_reverse;
                    app.sort = mode;
                }
                None => app.log("console", LogLevel::Info, format!("no column {n} on screen: {} shown", shown.len())),
            }
        }
        Action::OnlyNotAlive => {
            app.only_not_alive = !app.only_not_alive;
            app.selected = 0;
        }
        Action::OnlyLeaks => {
            app.only_leaks = !app.only_leaks;
            app.selected = 0;
        }
        Action::Help => app.dialog = Some(Dialog::Help),
        Action::Reload => return vec![Effect::RetryHosts, Effect::Reload],
        Action::Mouse => app.mouse = !app.mouse,
        Action::DetailsDown => app.details_scroll = app.details_scroll.saturating_add(1).min(DETAILS_MAX),
        Action::DetailsUp => app.details_scroll = app.details_scroll.saturating_sub(1),
        Action::Prune => ask_prune(app),
        Action::ReleaseLease => ask_release(app, false),
        Action::ReleaseSession => ask_release(app, true),
        Action::StopOwner => return ask_stop(app),
        Action::Repair => return ask_repair(app),
    }
    vec![]
}

/// Esc: leave the log, else clear the filter, else close the details. Nothing open:
/// nothing to do. Esc never quits (a stray Esc, or one pressed once too often, must not
/// close the console); q and Ctrl-C do.
fn back(app: &mut App) {
    if app.log_focus {
        app.log_focus = false;
        app.log_scroll = 0;
    } else if !app.filter.is_empty() {
        app.filter.clear();
    } else if app.show_details {
        app.show_details = false;
    }
}

/// A key while the window is too small: only `q` (quit) and `?` (the help, which is
/// drawn whole over the note and scrolls) act; the help's own keys close it.
fn on_key_too_small(app: &mut App, key: KeyEvent) -> Vec<Effect> {
    if matches!(app.dialog, Some(Dialog::Help)) {
        return on_dialog_key(app, key);
    }
    if !super::keys::is_plain(&key) {
        return vec![];
    }
    match key.code {
        KeyCode::Char('q') => {
            app.quit = true;
            vec![Effect::Quit]
        }
        KeyCode::Char('?') if app.dialog.is_none() => {
            app.dialog = Some(Dialog::Help);
            app.dialog_scroll = 0;
            vec![]
        }
        _ => vec![],
    }
}

/// A key for the extension, before the console's own: its jobs become effects.
fn extension_key(app: &mut App, key: &KeyEvent) -> Option<Vec<Effect>> {
    let selected = app.selected_lease().cloned();
    let screen = ratatui::layout::Rect::new(0, 0, app.size.0, app.size.1);
    let banner = super::view::banner_height(&super::view::banner_lines(app), screen.width);
    let panel = super::layout::areas(app, screen, banner).panel;
    let ext = app.extension.as_mut()?;
    let reaction = ext.on_key(key, &KeyContext { selected: selected.as_ref(), panel })?;
    let name = ext.name();
    for (level, text) in reaction.log {
        app.log(name, level, text);
    }
    Some(reaction.jobs.into_iter().map(Effect::Extension).collect())
}

/// Refuse an action on an invalid registry up front, with the reason.
fn refuse_if_invalid(app: &mut App, registry: usize, what: &str) -> bool {
    let r = &app.registries[registry];
    if let Some(err) = r.error().cloned() {
        let profile = r.location.label();
        let err = crate::lease::words::hint::hinted(&r.location, &err.to_string());
        let text = if r.location.is_remote() {
            format!("{what} refused: etcd cannot be reached ({err}); try again when it answers")
        } else if r.location.host().is_some() && r.error().is_some_and(crate::lease::Error::unanswered) {
            format!("{what} refused: {err}; try again when it answers (r tries now)")
        } else {
            let doctor = crate::lease::words::hint::Reach::of(&r.location).line(None, &["doctor", "--repair"]);
            format!("{what} refused: the registry is invalid ({err}); repair it first (F, or `{doctor}`)")
        };
        app.log(&profile, LogLevel::Warn, text);
        return true;
    }
    false
}

fn ask_prune(app: &mut App) {
    let mut targets = Vec::new();
    let mut kept_clock_step = 0;
    let mut kept_in: Vec<crate::lease::home::paths::Registry> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let several = app.tab_registries().len() > 1;
    for r in app.tab_registries() {
        // Among several (the all tab), one that cannot be read is left and named: a host
        // down blocks nothing on the others. Alone, it is refused with why.
        if let Some(e) = app.registries[r].error().filter(|_| several) {
            let why = if e.unanswered() { e.to_string() } else { format!("invalid: {e}") };
            skipped.push(format!("{} ({why})", app.registries[r].location.label()));
            continue;
        }
        if refuse_if_invalid(app, r, "prune") {
            return;
        }
        let dead: Vec<LeaseRow> = app.registries[r]
            .leases
            .iter()
            .filter(|l| matches!(l.liveness, Liveness::Dead(_) | Liveness::Recycled { .. }))
            .cloned()
            .collect();
        // The operator's prune keeps an owner flagged "clock step?" (the CLI removes one
        // only with --include-clock-step); the worker's prune does the same.
        let (suspects, dead): (Vec<LeaseRow>, Vec<LeaseRow>) =
            dead.into_iter().partition(|l| l.liveness.clock_step_suspected());
        kept_clock_step += suspects.len();
        if !suspects.is_empty() {
            kept_in.extend(app.registries[r].location.registry().cloned());
        }
        if !dead.is_empty() {
            targets.push((app.registries[r].location.clone(), dead));
        }
    }
    if targets.is_empty() {
        let profile = app.tab_registries().first().map(|r| app.registries[*r].location.label());
        // The hint names the registry (a pasted `leasectl prune` would act on ~/.hermes).
        use crate::lease::words::hint::Reach;
        let reach = |r: &crate::lease::home::paths::Registry| Reach::of(&crate::lease::Location::File(r.clone()));
        let command = match kept_in.as_slice() {
            [one] => reach(one).line(None, &["prune", "--include-clock-step"]),
            several => several
                .first()
                .map_or_else(Reach::plain, reach)
                .line(Some(None), &["--all-profiles", "prune", "--include-clock-step"]),
        };
        let text = if kept_clock_step > 0 {
            format!(
                "prune: nothing to do; {} flagged clock step? kept (alive, start time off by whole seconds; \
                 `{command}` removes {})",
                plural(kept_clock_step, "owner", "owners"),
                if kept_clock_step == 1 { "it" } else { "them" }
            )
        } else {
            "prune: no dead or recycled owners; nothing to do".to_owned()
        };
        let text = match skipped.is_empty() {
            true => text,
            false => format!("{text} where it reads; not pruned (cannot be read now): {}", skipped.join("; ")),
        };
        app.log(&profile.unwrap_or_default(), LogLevel::Info, text);
        return;
    }
    app.dialog = Some(Dialog::ConfirmPrune { targets, kept_clock_step, skipped });
}

/// `F`: repair the current tab's invalid registry (the worker plans it first).
fn ask_repair(app: &mut App) -> Vec<Effect> {
    let invalid: Vec<usize> =
        app.tab_registries().into_iter().filter(|r| app.registries[*r].error().is_some()).collect();
    match invalid.first() {
        Some(r) => vec![Effect::PlanRepair { location: app.registries[*r].location.clone() }],
        None => {
            let profile = app.tab_registries().first().map(|r| app.registries[*r].location.label());
            app.log(&profile.unwrap_or_default(), LogLevel::Info, "repair: the registry is valid; nothing to repair");
            vec![]
        }
    }
}

/// `S`: the worker plans the stop of the selected lease's owner (what it would end, or
/// why it may not); the dialog that asks comes with the plan.
fn ask_stop(app: &mut App) -> Vec<Effect> {
    let Some((r, l)) = app.selection() else {
        return vec![];
    };
    if refuse_if_invalid(app, r, "stop") {
        return vec![];
    }
    let reg = &app.registries[r];
    let id = reg.leases[l].entry.lease_id().to_owned();
    if app.ending.contains(&id) {
        app.log(&reg.location.label(), LogLevel::Info, "stop: its owner is being ended already".to_owned());
        return vec![];
    }
    vec![Effect::PlanStop { location: reg.location.clone(), target: Target::Lease(id) }]
}

fn ask_release(app: &mut App, whole_session: bool) {
    let Some((r, l)) = app.selection() else {
        return;
    };
    if refuse_if_invalid(app, r, "force-release") {
        return;
    }
    let reg = &app.registries[r];
    let chosen = &reg.leases[l];
    let (target, leases): (Target, Vec<LeaseRow>) = if whole_session {
        let s = chosen.entry.session_id().to_owned();
        let ls = reg.leases.iter().filter(|x| x.entry.session_id() == s).cloned().collect();
        (Target::Session(s), ls)
    } else {
        (Target::Lease(chosen.entry.lease_id().to_owned()), vec![chosen.clone()])
    };
    // A gateway's lease with no turn running for its chat is a leftover: no live owner's.
    let leftover = |x: &LeaseRow| {
        x.owner_move.as_ref().is_some_and(|m| {
            matches!(m.kind, crate::lease::owners::kind::OwnerKind::Gateway { .. })
                && m.safe == crate::lease::owners::kind::SafeMove::ForceRelease
        })
    };
    let live = leases.iter().any(|x| may_be_alive(&x.liveness) && !leftover(x));
    app.dialog = Some(Dialog::ConfirmRelease {
        location: reg.location.clone(),
        target,
        leases,
        live,
        expected: chosen.entry.session_id().to_owned(),
        typed: String::new(),
        mismatch: false,
    });
}

/// A question answered from `table`: yes closes the dialog with `yes`, no closes it with
/// nothing, any other key leaves it open.
fn answer(app: &mut App, key: &KeyEvent, table: &[keys::Binding<Answer>], yes: Vec<Effect>) -> Vec<Effect> {
    match lookup(table, key) {
        Some(Answer::Yes | Answer::Force) => {
            app.dialog = None;
            yes
        }
        Some(Answer::No) => {
            app.dialog = None;
            vec![]
        }
        None => vec![],
    }
}

/// Where typing a live owner's session id stands after a key.
enum Typing {
    Editing,
    Cancelled,
    /// Enter on exactly the session id.
    Confirmed,
}

/// One key of the session id typed to release a live owner's lease: Enter on a
/// mismatch says so and releases nothing.
fn type_session_id(key: &KeyEvent, typed: &mut String, expected: &str, mismatch: &mut bool) -> Typing {
    match lookup(LINE_KEYS, key) {
        Some(Edit::Cancel) => return Typing::Cancelled,
        Some(Edit::Done) if typed == expected => return Typing::Confirmed,
        Some(Edit::Done) => *mismatch = true,
        Some(Edit::Erase) => {
            typed.pop();
            *mismatch = false;
        }
        None => {
            if let Some(c) = typed_char(key) {
                typed.push(c);
                *mismatch = false;
            }
        }
    }
    Typing::Editing
}

/// A key in a stop's dialog. An owner of more than one session (a gateway, an app
/// backend; here or in another profile) is asked about again, its sessions named:
/// stopping it ends every one.
fn on_stop_key(
    app: &mut App,
    key: &KeyEvent,
    location: crate::lease::Location,
    plan: Box<crate::lease::stop::StopPlan>,
    again: bool,
) -> Vec<Effect> {
    if !again && app.sessions_of_plan(&location, &plan) > 1 {
        if matches!(lookup(CONFIRM_KEYS, key), Some(Answer::Yes | Answer::Force)) {
            app.dialog = Some(Dialog::ConfirmStop { location, plan, again: true });
            app.dialog_scroll = 0;
            return vec![];
        }
        return answer(app, key, CONFIRM_KEYS, vec![]);
    }
    let ids: Vec<String> =
        plan.owners.iter().flat_map(|o| o.all_leases().map(|v| v.entry.lease_id().to_owned())).collect();
    let effects = answer(app, key, CONFIRM_KEYS, vec![Effect::Stop { location, plan }]);
    if !effects.is_empty() {
        app.ending.extend(ids);
    }
    effects
}

fn on_dialog_key(app: &mut App, key: KeyEvent) -> Vec<Effect> {
    // Arrows, pages, Home and End scroll a dialog's list (a prune of thousands), whatever
    // the dialog: none of them types text with these keys.
    let scroll = app.dialog_scroll;
    let moved = lookup(SCROLL_KEYS, &key).and_then(|action| match action {
        Action::Down => Some(scroll.saturating_add(1)),
        Action::Up => Some(scroll.saturating_sub(1)),
        Action::PageDown => Some(scroll.saturating_add(PAGE)),
        Action::PageUp => Some(scroll.saturating_sub(PAGE)),
        Action::First => Some(0),
        Action::Last => Some(usize::MAX),
        _ => None,
    });
    if let Some(to) = moved {
        // Bounded by a generous row count (wrapped lines included); the view stops at the end.
        app.dialog_scroll = to.min(app.dialog.as_ref().map_or(0, |d| 3 * d.list_len()));
        return vec![];
    }
    if let Some(Dialog::ConfirmStop { location, plan, again }) = app.dialog.as_ref() {
        let (location, plan, again) = (location.clone(), plan.clone(), *again);
        return on_stop_key(app, &key, location, plan, again);
    }
    let Some(dialog) = app.dialog.as_mut() else {
        return vec![];
    };
    match dialog {
        Dialog::Help | Dialog::LogLine { .. } => {
            if lookup(HELP_KEYS, &key).is_some() {
                app.dialog = None;
            }
            vec![]
        }
        Dialog::ConfirmRepair { location, needs_force: false, .. } => {
            let yes = vec![Effect::Repair { location: location.clone(), force: false }];
            answer(app, &key, CONFIRM_KEYS, yes)
        }
        // A repair that may lose a live owner's lease runs only on `!`, said in the dialog.
        Dialog::ConfirmRepair { location, needs_force: true, .. } => {
            let forced = vec![Effect::Repair { location: location.clone(), force: true }];
            answer(app, &key, FORCE_KEYS, forced)
        }
        Dialog::ConfirmStop { .. } => vec![],
        Dialog::ConfirmPrune { targets, .. } => {
            let yes = targets.iter().map(|(location, _)| Effect::Prune { location: location.clone() }).collect();
            answer(app, &key, CONFIRM_KEYS, yes)
        }
        Dialog::ConfirmRelease { location, target, live, expected, typed, mismatch, .. } => {
            if !*live {
                let yes = vec![Effect::ForceRelease {
                    location: location.clone(),
                    target: target.clone(),
                    allow_live: false,
                }];
                return answer(app, &key, CONFIRM_KEYS, yes);
            }
            // A live owner: the operator must type the session id, deliberately.
            let effect = Effect::ForceRelease { location: location.clone(), target: target.clone(), allow_live: true };
            match type_session_id(&key, typed, expected, mismatch) {
                Typing::Editing => vec![],
                Typing::Cancelled => {
                    app.dialog = None;
                    vec![]
                }
                Typing::Confirmed => {
                    app.dialog = None;
                    vec![effect]
                }
            }
        }
    }
}
