//! `update()`: keys, filters, confirmations and snapshot diffs, on in-memory state.

use crate::common;

use common::*;
use leasectl::lease::owners::liveness::DeadCause;
use leasectl::lease::{Error, Liveness, Location, Target};
use leasectl::tui::event::{ActionDone, Effect, Event, Loaded, LockHolder};
use leasectl::tui::sort::SortMode;
use leasectl::tui::state::Dialog;
use leasectl::tui::update::update;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(app: &mut leasectl::tui::state::App, code: KeyCode) -> Vec<Effect> {
    update(app, Event::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn chars(app: &mut leasectl::tui::state::App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn selected_session(app: &leasectl::tui::state::App) -> String {
    app.selected_lease().map(|l| l.entry.session_id().to_owned()).unwrap_or_default()
}

fn last_log(app: &leasectl::tui::state::App) -> String {
    app.log.back().map(|l| l.text.clone()).unwrap_or_default()
}

#[test]
fn moving_is_clamped_to_the_lease_rows() {
    let mut app = app(vec![mixed_root()]);
    assert_eq!(selected_session(&app), "chat-11");
    key(&mut app, KeyCode::Up);
    assert_eq!(app.selected, 0);
    key(&mut app, KeyCode::Char('j'));
    assert_eq!(selected_session(&app), "chat-42");
    for _ in 0..10 {
        key(&mut app, KeyCode::Down);
    }
    assert_eq!(app.selected, 3, "clamped at the last lease");
    key(&mut app, KeyCode::Char('g'));
    assert_eq!(app.selected, 0);
    key(&mut app, KeyCode::Char('G'));
    assert_eq!(app.selected, 3);
}

#[test]
fn tabs_cycle_through_every_registry_and_all() {
    let work = registry("work");
    let mut app =
        app(vec![mixed_root(), snap(&work, None, Ok(vec![alive(entry("w1", "W", "cli", 9, 5.0, None), "x")]))]);
    assert_eq!(app.tab_count(), 3);
    assert_eq!(app.lease_rows().len(), 4);
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.lease_rows().len(), 1);
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.lease_rows().len(), 5, "the all tab shows every registry");
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.tab, 0);
    key(&mut app, KeyCode::BackTab);
    assert_eq!(app.tab, 2);
}

#[test]
fn filter_matches_session_surface_pid_and_lease_id() {
    let mut app = app(vec![mixed_root()]);
    key(&mut app, KeyCode::Char('/'));
    chars(&mut app, "gate");
    assert_eq!(app.lease_rows().len(), 1, "applied live, as it is typed");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.filter, "gate");
    assert_eq!(app.lease_rows().len(), 1);
    for (needle, expect) in [("4101", "chat-42"), ("99887766", "chat-9"), ("CHAT-11", "chat-11")] {
        app.filter = needle.into();
        assert_eq!(app.lease_rows().len(), 1, "{needle}");
        assert_eq!(selected_session(&app), expect);
    }
    key(&mut app, KeyCode::Esc);
    assert!(app.filter.is_empty(), "Esc clears the filter first");
    assert!(!app.quit);
    key(&mut app, KeyCode::Char('/'));
    chars(&mut app, "zzz");
    key(&mut app, KeyCode::Esc);
    assert!(app.filter.is_empty() && app.filter_input.is_none(), "Esc cancels typing");
}

/// `/` on a filter in force shows it selected: typing replaces it (k9s), Backspace edits
/// it, Esc clears it (`dead` then `/!alive` was `dead!alive`).
#[test]
fn slash_on_a_filter_in_force_replaces_it_as_typed() {
    let mut app = app(vec![mixed_root()]);
    key(&mut app, KeyCode::Char('/'));
    chars(&mut app, "dead");
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('/'));
    assert!(app.filter_selected, "the text in force is selected");
    chars(&mut app, "!alive");
    assert_eq!(app.filter_input.as_deref(), Some("!alive"), "typing replaced it");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.filter, "!alive");
    // Backspace edits the selected text instead.
    key(&mut app, KeyCode::Char('/'));
    key(&mut app, KeyCode::Backspace);
    chars(&mut app, "x");
    assert_eq!(app.filter_input.as_deref(), Some("!alivx"));
    // Esc clears the filter, typed or in force.
    key(&mut app, KeyCode::Esc);
    assert!(app.filter.is_empty() && app.filter_input.is_none());
}

#[test]
fn sort_cycles_and_only_not_alive_hides_live_owners() {
    let mut app = app(vec![mixed_root()]);
    let order = |app: &leasectl::tui::state::App| -> Vec<String> {
        app.lease_rows().iter().map(|(r, l)| app.registries[*r].leases[*l].entry.session_id().to_owned()).collect()
    };
    assert_eq!(order(&app), ["chat-11", "chat-42", "chat-7", "chat-9"]);
    key(&mut app, KeyCode::Char('s'));
    assert_eq!(app.sort, SortMode::Age);
    assert_eq!(order(&app), ["chat-42", "chat-9", "chat-7", "chat-11"], "oldest first");
    key(&mut app, KeyCode::Char('s'));
    assert_eq!(order(&app), ["chat-42", "chat-7", "chat-9", "chat-11"], "by pid");
    key(&mut app, KeyCode::Char('s'));
    key(&mut app, KeyCode::Char('s'));
    assert_eq!(app.sort, SortMode::Liveness);
    assert_eq!(order(&app)[0], "chat-7", "dead first");
    key(&mut app, KeyCode::Char('d'));
    assert!(!order(&app).contains(&"chat-42".to_owned()));
    assert_eq!(order(&app).len(), 3);
}

#[test]
fn prune_asks_first_and_lists_only_dead_and_recycled() {
    let mut app = app(vec![mixed_root()]);
    assert!(key(&mut app, KeyCode::Char('p')).is_empty());
    match &app.dialog {
        Some(Dialog::ConfirmPrune { targets, kept_clock_step, .. }) => {
            assert_eq!(targets.len(), 1);
            let ids: Vec<&str> = targets[0].1.iter().map(|l| l.entry.session_id()).collect();
            // chat-11 reads as recycled by exactly 3 s: a clock step, kept by the operator's prune.
            assert_eq!(ids, ["chat-7", "chat-9"]);
            assert_eq!(*kept_clock_step, 1);
        }
        other => panic!("expected the prune dialog, got {other:?}"),
    }
    assert!(key(&mut app, KeyCode::Char('x')).is_empty(), "other keys do nothing in a dialog");
    assert_eq!(key(&mut app, KeyCode::Char('n')), vec![]);
    assert!(app.dialog.is_none());
    key(&mut app, KeyCode::Char('p'));
    assert_eq!(key(&mut app, KeyCode::Char('y')), vec![Effect::Prune { location: registry("root") }]);
    assert!(app.dialog.is_none());
}

#[test]
fn a_prune_with_only_clock_step_owners_left_names_the_command_for_this_home() {
    // Only chat-11 (a clock step) in the work profile: the hint names that registry.
    let mut work = mixed_root();
    work.location = registry("work");
    if let Ok(leases) = &mut work.leases {
        leases.retain(|l| l.entry.session_id() == "chat-11");
    }
    let mut app = app(vec![mixed_root(), work]);
    key(&mut app, KeyCode::Tab);
    assert!(key(&mut app, KeyCode::Char('p')).is_empty());
    let text = last_log(&app);
    let hint = text.split('`').nth(1).unwrap_or_else(|| panic!("a hint: {text}"));
    assert_eq!(hint, "leasectl --home /home/op/.hermes --profile work prune --include-clock-step", "{text}");
    use clap::Parser as _;
    leasectl::cli::Cli::try_parse_from(hint.split(' ')).expect("the hint parses");
}

#[test]
fn releasing_a_dead_owner_needs_y() {
    let mut app = app(vec![mixed_root()]);
    app.filter = "chat-7".into();
    key(&mut app, KeyCode::Char('x'));
    assert!(matches!(app.dialog, Some(Dialog::ConfirmRelease { live: false, .. })));
    let effects = key(&mut app, KeyCode::Char('y'));
    assert_eq!(
        effects,
        vec![Effect::ForceRelease {
            location: registry("root"),
            target: Target::Lease("0f1e2d3c4b5a69788796a5b4c3d2e1f0".into()),
            allow_live: false
        }]
    );
}

/// A clock-step suspect is most likely the same, live process (prune keeps it): releasing
/// it is a live owner's release, with the session id typed, not a dead one's `y`.
#[test]
fn releasing_a_clock_step_owner_is_a_live_owners_release() {
    let mut app = app(vec![mixed_root()]);
    app.filter = "chat-11".into();
    key(&mut app, KeyCode::Char('x'));
    assert!(matches!(app.dialog, Some(Dialog::ConfirmRelease { live: true, .. })), "{:?}", app.dialog);
    assert!(key(&mut app, KeyCode::Char('y')).is_empty(), "y alone is not enough");
}

#[test]
fn releasing_a_live_owner_needs_the_session_id_typed() {
    let mut app = app(vec![mixed_root()]);
    app.filter = "chat-42".into();
    key(&mut app, KeyCode::Char('x'));
    assert!(matches!(app.dialog, Some(Dialog::ConfirmRelease { live: true, .. })));
    assert!(key(&mut app, KeyCode::Char('y')).is_empty(), "y alone is not enough");
    assert!(key(&mut app, KeyCode::Enter).is_empty(), "wrong text: nothing happens");
    key(&mut app, KeyCode::Backspace);
    chars(&mut app, "chat-4");
    assert!(key(&mut app, KeyCode::Enter).is_empty(), "a prefix is not enough");
    chars(&mut app, "2");
    let effects = key(&mut app, KeyCode::Enter);
    assert_eq!(
        effects,
        vec![Effect::ForceRelease {
            location: registry("root"),
            target: Target::Lease("a1b2c3d4e5f60718293a4b5c6d7e8f90".into()),
            allow_live: true
        }]
    );
    // X targets the whole session.
    key(&mut app, KeyCode::Char('X'));
    match &app.dialog {
        Some(Dialog::ConfirmRelease { target, live, .. }) => {
            assert_eq!(*target, Target::Session("chat-42".into()));
            assert!(*live);
        }
        other => panic!("{other:?}"),
    }
    key(&mut app, KeyCode::Esc);
    assert!(app.dialog.is_none() && !app.quit);
}

#[test]
fn actions_on_an_invalid_registry_are_refused_with_the_reason() {
    let mut app = app(vec![mixed_root()]);
    update(&mut app, loaded(vec![snap(&registry("root"), Some(4), Err("entry 2: pid is a bool".into()))]));
    assert_eq!(app.registries[0].leases.len(), 4, "the last good snapshot stays");
    key(&mut app, KeyCode::Char('p'));
    assert!(app.dialog.is_none());
    assert!(last_log(&app).contains("prune refused: the registry is invalid (entry 2: pid is a bool)"));
    key(&mut app, KeyCode::Char('x'));
    assert!(app.dialog.is_none());
    assert!(last_log(&app).contains("force-release refused"));
}

#[test]
fn snapshot_diffs_become_log_lines() {
    let root = registry("root");
    let a = entry("aaaaaaaa000000000000000000000000", "A", "cli", 11, 10.0, None);
    let b = entry("bbbbbbbb000000000000000000000000", "B", "tui", 12, 10.0, None);
    let c = entry("cccccccc000000000000000000000000", "C", "desktop", 13, 10.0, None);
    let d = entry("dddddddd000000000000000000000000", "D", "cli", 14, 10.0, None);
    let mut app = app(vec![snap(
        &root,
        None,
        Ok(vec![alive(a.clone(), "x"), alive(b.clone(), "y"), dead(c.clone()), alive(d.clone(), "z")]),
    )]);
    let before = app.log.len();
    let e = entry("eeeeeeee000000000000000000000000", "E", "cli", 15, 0.0, None);
    // A died, B recycled, C pruned, D released, E acquired, cap set.
    update(
        &mut app,
        loaded(vec![snap(
            &root,
            Some(3),
            Ok(vec![
                leasectl::tui::event::LeaseRow {
                    entry: std::sync::Arc::new(a),
                    liveness: Liveness::Dead(DeadCause::Zombie),
                    owner: None,
                    ttl_left: None,
                    leak: None,
                    owner_move: None,
                    host: None,
                },
                recycled(b, false),
                alive(e, "w"),
            ]),
        )]),
    );
    let lines: Vec<String> = app.log.iter().skip(before).map(|l| l.text.clone()).collect();
    let expect = [
        "cap-changed: none -> 3",
        // As it happened: a dead owner's lease is pruned before a grant (issue 37: the
        // demo's step 4 read "acquired" before the "pruned" that made room for it).
        "pruned: session C (desktop, pid 13, lease cccccccc)",
        "owner-died: session A (cli, pid 11, lease aaaaaaaa)",
        "owner-recycled: session B (tui, pid 12, lease bbbbbbbb)",
        "acquired: session E (cli, pid 15, lease eeeeeeee)",
        "released: session D (cli, pid 14, lease dddddddd)",
    ];
    assert_eq!(lines, expect);
    update(&mut app, loaded(vec![snap(&root, Some(3), Err("not JSON: EOF".into()))]));
    assert_eq!(last_log(&app), "registry-invalid: not JSON: EOF");
    update(&mut app, loaded(vec![snap(&root, Some(3), Ok(vec![]))]));
    assert!(app.log.iter().any(|l| l.text == "registry-valid: readable again"));
}

#[test]
fn ticks_and_file_events_ask_the_worker() {
    let mut app = app(vec![mixed_root()]);
    assert_eq!(update(&mut app, Event::Tick(NOW + 1.0)), vec![Effect::Relive]);
    assert_eq!(app.now, NOW + 1.0);
    assert_eq!(app.registries[0].history.back(), Some(&1), "one live lease sampled");
    assert_eq!(update(&mut app, Event::FsChanged(vec![])), vec![Effect::Reload]);
    // Armed after the first read began: only what changed meanwhile is read again.
    assert_eq!(update(&mut app, Event::FeedArmed), vec![Effect::ReloadStale]);
    assert_eq!(key(&mut app, KeyCode::Char('q')), vec![Effect::Quit]);
}

#[test]
fn action_results_are_logged_and_a_held_lock_is_shown() {
    let mut app = app(vec![mixed_root()]);
    let effects = update(
        &mut app,
        Event::ActionDone(ActionDone {
            location: registry("root"),
            what: "prune".into(),
            result: Err(Error::LockTimeout {
                lock_path: "/x".into(),
                waited: std::time::Duration::from_secs(3),
                holder_pid: Some(777),
                holder_command: None,
            }),
            audit_failures: vec![],
        }),
    );
    assert_eq!(effects, vec![Effect::Reload]);
    assert_eq!(app.registries[0].locked_by, Some(777));
    assert!(last_log(&app).starts_with("prune refused: registry lock"));
}

#[test]
fn a_new_profile_appears_as_a_new_tab() {
    let mut app = app(vec![mixed_root()]);
    assert_eq!(app.tab_count(), 1);
    update(&mut app, loaded(vec![mixed_root(), snap(&registry("late"), None, Ok(vec![]))]));
    assert_eq!(app.tab_count(), 3, "late + all");
    assert!(app.log.iter().any(|l| l.text.starts_with("new profile")));
}

#[test]
fn a_lock_held_across_checks_is_shown_with_its_pid() {
    let mut app = app(vec![mixed_root()]);
    assert_eq!(app.registries[0].stuck_lock(NOW), None);
    let mut held = mixed_root();
    let holder = LockHolder { pid: 4242, command: Some("flock".into()), since: NOW - 5.0 };
    held.lock_holder = Some(holder.clone());
    update(&mut app, loaded(vec![held.clone()]));
    update(&mut app, Event::Tick(NOW + 7.0));
    assert_eq!(app.registries[0].stuck_lock(app.now), Some((&holder, 12.0)), "held since the worker first saw it");
    update(&mut app, loaded(vec![mixed_root()]));
    assert_eq!(app.registries[0].stuck_lock(app.now), None, "released");
}

#[test]
fn repair_is_planned_confirmed_then_run() {
    let mut app = app(vec![mixed_root()]);
    assert!(key(&mut app, KeyCode::Char('F')).is_empty(), "a valid registry: nothing to repair");
    assert!(last_log(&app).contains("nothing to repair"));
    update(&mut app, loaded(vec![snap(&registry("root"), Some(4), Err("not JSON: EOF".into()))]));
    assert_eq!(key(&mut app, KeyCode::Char('F')), vec![Effect::PlanRepair { location: registry("root") }]);
    update(
        &mut app,
        Event::RepairPlanned {
            location: registry("root"),
            result: Ok(vec!["keep 3 valid lease(s)".into(), "drop entry 3 (lease x): pid is a bool".into()]),
            needs_force: false,
        },
    );
    assert!(matches!(app.dialog, Some(Dialog::ConfirmRepair { .. })));
    assert_eq!(key(&mut app, KeyCode::Char('y')), vec![Effect::Repair { location: registry("root"), force: false }]);
    assert!(app.dialog.is_none());
    // A repair that may lose a live owner's lease: y does nothing, F (the key that opened
    // it) neither; only ! runs it, forced.
    update(
        &mut app,
        Event::RepairPlanned {
            location: registry("root"),
            result: Ok(vec!["unreadable from byte 120 on: the entries that stood there are lost".into()]),
            needs_force: true,
        },
    );
    assert!(key(&mut app, KeyCode::Char('y')).is_empty() && key(&mut app, KeyCode::Char('F')).is_empty());
    assert!(app.dialog.is_some());
    assert_eq!(key(&mut app, KeyCode::Char('!')), vec![Effect::Repair { location: registry("root"), force: true }]);
}

#[test]
fn an_idle_console_draws_every_second_only_while_a_second_shows() {
    // mixed_root's youngest lease is 90 s old: ages show minutes.
    let mut app = app(vec![mixed_root()]);
    assert!(app.ticks_visibly(), "the sparkline is still filling");
    for k in 1..=25 {
        update(&mut app, Event::Tick(NOW + f64::from(k)));
    }
    assert!(!app.ticks_visibly(), "old leases, a settled sparkline, no dialog: the minute is enough");
    // A lease under a minute old counts seconds.
    let young = alive(entry("feedfacefeedfacefeedfacefeedface", "chat-new", "cli", 4500, -20.0, None), "hermes");
    let mut snapshot = mixed_root();
    if let Ok(leases) = snapshot.leases.as_mut() {
        leases.push(young);
    }
    update(&mut app, loaded(vec![snapshot]));
    assert!(app.ticks_visibly(), "a lease 5 s old shows its seconds");
    update(&mut app, loaded(vec![mixed_root()]));
    key(&mut app, KeyCode::Char('p'));
    assert!(app.dialog.is_some() && app.ticks_visibly(), "a dialog may count down");
}

#[test]
fn the_rows_follow_every_new_snapshot_filter_sort_and_tab() {
    let mut app = app(vec![mixed_root(), snap(&registry("work"), None, Ok(vec![]))]);
    let sessions = |app: &leasectl::tui::state::App| -> Vec<String> {
        app.lease_rows().iter().map(|(r, l)| app.registries[*r].leases[*l].entry.session_id().to_owned()).collect()
    };
    assert_eq!(sessions(&app), ["chat-11", "chat-42", "chat-7", "chat-9"]);
    let mut snapshot = mixed_root();
    if let Ok(leases) = snapshot.leases.as_mut() {
        leases.remove(0);
    }
    update(&mut app, loaded(vec![snapshot, snap(&registry("work"), None, Ok(vec![]))]));
    assert_eq!(sessions(&app), ["chat-11", "chat-7", "chat-9"], "a new snapshot");
    app.sort = SortMode::Pid;
    assert_eq!(sessions(&app), ["chat-7", "chat-9", "chat-11"], "another sort");
    app.filter = "chat-9".into();
    assert_eq!(sessions(&app), ["chat-9"], "a filter");
    app.tab = 1;
    assert!(sessions(&app).is_empty(), "another tab");
}

#[test]
fn esc_closes_and_clears_but_never_quits() {
    let mut app = app(vec![mixed_root()]);
    key(&mut app, KeyCode::Enter);
    assert!(app.show_details);
    assert!(key(&mut app, KeyCode::Esc).is_empty() && !app.show_details, "Esc closes the details");
    for _ in 0..3 {
        let effects = key(&mut app, KeyCode::Esc);
        assert!(!effects.contains(&Effect::Quit) && !app.quit, "Esc with nothing open does nothing: {effects:?}");
    }
    assert_eq!(key(&mut app, KeyCode::Char('q')), vec![Effect::Quit], "q quits");
}

#[test]
fn an_action_is_logged_once_and_the_log_keeps_ten_thousand_events() {
    use leasectl::lease::{LeaseView, Removal};
    use leasectl::tui::event::ActionOutcome;
    let mut app = app(vec![mixed_root()]);
    let gone = mixed_root().leases.expect("leases")[1].clone();
    assert_eq!(gone.entry.session_id(), "chat-7");
    let removed = LeaseView::local((*gone.entry).clone(), gone.liveness.clone());
    update(
        &mut app,
        Event::ActionDone(ActionDone {
            location: registry("root"),
            what: "force-release lease 0f1e2d3c".into(),
            result: Ok(ActionOutcome::Removed(Removal {
                removed: vec![removed],
                dry_run: false,
                live_owner: false,
                ..Removal::default()
            })),
            audit_failures: vec![],
        }),
    );
    let mut after = mixed_root();
    if let Ok(leases) = after.leases.as_mut() {
        leases.remove(1);
    }
    // The worker found the console's own record of it in the audit file (issue 38: the
    // registry's line says who removed it, as `events -f` and `ls -w` do).
    let by = leasectl::lease::home::remover::Remover::Operator("root on gw1: leasectl console: force-release".into());
    after.removed_by = vec![(gone.entry.lease_id().to_owned(), by)];
    update(&mut app, loaded(vec![after]));
    let mentions: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).filter(|t| t.contains("0f1e2d3c")).collect();
    assert_eq!(mentions.len(), 2, "the action, then the registry's event, never a prune: {mentions:?}");
    assert!(mentions[0].starts_with("force-release lease 0f1e2d3c: removed 1"), "{mentions:?}");
    assert!(
        mentions[1].starts_with("force-released: session chat-7")
            && mentions[1].ends_with(" — by root on gw1: leasectl console: force-release"),
        "{mentions:?}"
    );
    // Another writer's removal is still logged.
    let mut later = mixed_root();
    if let Ok(leases) = later.leases.as_mut() {
        leases.truncate(1);
    }
    update(&mut app, loaded(vec![later]));
    assert!(app.log.iter().any(|l| l.text.starts_with("pruned: session chat-9")), "{:?}", app.log);

    for i in 0..10_050 {
        app.log("root", leasectl::tui::event::LogLevel::Info, format!("event {i}"));
    }
    assert_eq!(app.log.len(), 10_000);
    assert_eq!(app.log.back().map(|l| l.text.as_str()), Some("event 10049"));
}

#[test]
fn the_filter_covers_every_column_and_a_leading_bang_inverts_it() {
    let mut app = app(vec![mixed_root()]);
    let sessions = |app: &leasectl::tui::state::App| -> Vec<String> {
        app.lease_rows().iter().map(|(r, l)| app.registries[*r].leases[*l].entry.session_id().to_owned()).collect()
    };
    for (needle, expect) in [
        ("HERMES-DESK", vec!["chat-42"]),
        ("tab-1", vec!["chat-42"]),
        ("t-9", vec!["chat-9"]),
        ("dead", vec!["chat-7"]),
        ("recycled", vec!["chat-11", "chat-9"]),
        ("!recycled", vec!["chat-42", "chat-7"]),
        ("!", vec!["chat-11", "chat-42", "chat-7", "chat-9"]),
    ] {
        app.filter = needle.into();
        assert_eq!(sessions(&app), expect, "{needle}");
    }
    // Typing over the filter in force replaces it; Esc clears it (issue 25: k9s' way).
    app.filter = "dead".into();
    key(&mut app, KeyCode::Char('/'));
    chars(&mut app, "zzz");
    assert!(sessions(&app).is_empty());
    key(&mut app, KeyCode::Esc);
    assert_eq!(sessions(&app).len(), 4);
}

#[test]
fn l_shows_only_leak_suspects_and_again_shows_all() {
    use std::sync::Arc;
    let root = registry("root");
    let mut leaked = alive(entry("b0000000000000000000000000000002", "chat-2", "gateway", 502, 7200.0, None), "gw");
    leaked.leak = Some(Arc::from("no activity for 5h but pid 502 (gw) still holds it"));
    let mut app = app(vec![snap(
        &root,
        None,
        Ok(vec![alive(entry("a0000000000000000000000000000001", "chat-1", "cli", 501, 60.0, None), "hermes"), leaked]),
    )]);
    let sessions = |app: &leasectl::tui::state::App| -> Vec<String> {
        app.rows()
            .iter()
            .filter_map(|r| match r {
                leasectl::tui::state::Row::Session { session, .. } => Some(session.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(sessions(&app), ["chat-1", "chat-2"]);
    key(&mut app, KeyCode::Char('l'));
    assert!(app.only_leaks);
    assert_eq!(sessions(&app), ["chat-2"]);
    key(&mut app, KeyCode::Char('l'));
    assert_eq!(sessions(&app), ["chat-1", "chat-2"]);
}

/// The console opens with what the recorder saw before it, marked as such.
#[test]
fn recorded_events_from_before_open_the_event_log_marked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).expect("logs/");
    let now = common::NOW;
    let old = format!(
        "{{\"time\": \"x\", \"ts\": {}, \"event\": \"force-released\", \"profile\": \"root\", \"detail\": \"by ops on gw: leasectl force-release 0f3c --live\", \
          \"lease\": {{\"entry\": {{\"lease_id\": \"0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13\", \"session_id\": \"S1\", \"surface\": \"cli\", \"pid\": 4433}}}}}}\n\
         {{\"time\": \"y\", \"ts\": {}, \"event\": \"acquired\", \"profile\": \"root\", \"lease\": {{\"entry\": {{\"session_id\": \"too old\"}}}}}}\n",
        now - 3600.0,
        now - 3.0 * 86_400.0
    );
    std::fs::write(logs.join("leasectl-events.jsonl"), old).expect("journal");
    let location = leasectl::lease::Location::File(leasectl::lease::Registry::new("root", dir.path()));
    let mut app = leasectl::tui::state::App::new(vec![location.clone()], now, jiff::tz::TimeZone::UTC);
    leasectl::tui::load_history(&mut app, &[location], None);
    let lines: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        lines[0],
        "↶ force-released session S1 (cli, pid 4433, lease 0f3c9e2a) — by ops on gw: leasectl force-release 0f3c --live"
    );
    assert_eq!(app.log[0].at, now - 3600.0, "shown at the time it happened");
    assert!(lines[1].contains("recorded before this console opened"));
}

/// A key with Ctrl or Alt held is not the plain key: Ctrl-x does not force-release, Alt-p
/// does not prune, Ctrl-y does not answer a dialog, and neither types into a filter.
#[test]
fn keys_with_ctrl_or_alt_are_not_their_plain_keys() {
    let mut app = app(vec![mixed_root()]);
    app.filter = "chat-7".into();
    let with = |app: &mut leasectl::tui::state::App, c: char, m: KeyModifiers| {
        update(app, Event::Key(KeyEvent::new(KeyCode::Char(c), m)))
    };
    assert!(with(&mut app, 'x', KeyModifiers::CONTROL).is_empty());
    assert!(app.dialog.is_none(), "Ctrl-x opened {:?}", app.dialog);
    assert!(with(&mut app, 'p', KeyModifiers::ALT).is_empty());
    assert!(app.dialog.is_none(), "Alt-p opened {:?}", app.dialog);
    key(&mut app, KeyCode::Char('x'));
    assert!(matches!(app.dialog, Some(Dialog::ConfirmRelease { live: false, .. })));
    assert!(with(&mut app, 'y', KeyModifiers::CONTROL).is_empty(), "Ctrl-y is not y");
    assert!(app.dialog.is_some());
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Esc);
    assert!(app.dialog.is_none() && app.filter.is_empty());
    key(&mut app, KeyCode::Char('/'));
    with(&mut app, 'w', KeyModifiers::CONTROL);
    chars(&mut app, "ab");
    assert_eq!(app.filter_input.as_deref(), Some("ab"), "Ctrl-w typed nothing");
    // Shift is part of a key: X (Shift-x) releases the whole session.
    key(&mut app, KeyCode::Esc);
    app.filter = "chat-7".into();
    update(&mut app, Event::Key(KeyEvent::new(KeyCode::Char('X'), KeyModifiers::SHIFT)));
    assert!(matches!(app.dialog, Some(Dialog::ConfirmRelease { .. })), "Shift-X is X");
}

/// The console opens on the root alone and finds the profiles itself, after its first
/// screen: those it finds on its first read were there before (a "watching" line each,
/// no "new profile"); one made later is new. The recorder's history, read on a thread of
/// its own, goes above whatever was logged before it came.
#[test]
fn profiles_found_by_the_first_read_are_not_new_and_late_history_goes_on_top() {
    use leasectl::lease::{Location, Registry};
    use leasectl::tui::worker::{Scope, Worker};
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    for p in ["lab", "work"] {
        crate::common::make_profile(root.join("profiles").join(p));
    }
    let journal = root.join("profiles/work/logs");
    std::fs::create_dir_all(&journal).expect("logs/");
    let now = leasectl::lease::now();
    std::fs::write(
        journal.join("leasectl-events.jsonl"),
        format!(
            "{{\"time\": \"x\", \"ts\": {}, \"event\": \"pruned\", \"profile\": \"work\", \"lease\": {{\"entry\": \
             {{\"lease_id\": \"0f3c9e2a5b7d4c1e8a6f2d9b0c4e7a13\", \"session_id\": \"S1\", \"surface\": \"cli\", \"pid\": 4433}}}}}}\n",
            now - 600.0
        ),
    )
    .expect("journal");
    let location = Location::File(Registry::new("root", root));
    let scope =
        Scope { locations: vec![location.clone()], discover_root: Some(root.to_path_buf()), discover_hosts: false };
    let mut worker = Worker::new(scope, std::time::Duration::from_secs(2), None);
    let mut app = leasectl::tui::state::App::new(vec![location.clone()], now, jiff::tz::TimeZone::UTC);
    let mut parts = vec![];
    assert!(worker.reload_in_parts(&mut |l| {
        parts.push(l);
        true
    }));
    for part in parts {
        update(&mut app, Event::Loaded(part));
    }
    let names: Vec<&str> = app.registries.iter().map(|r| r.location.name()).collect();
    assert_eq!(names, ["root", "lab", "work"]);
    let text = |app: &leasectl::tui::state::App| app.log.iter().map(|l| l.text.clone()).collect::<Vec<_>>();
    assert!(text(&app).iter().all(|l| !l.contains("new profile")), "{:?}", text(&app));
    assert_eq!(text(&app).iter().filter(|l| l.starts_with("watching ")).count(), 3, "{:?}", text(&app));
    // The history arrives after the first lines: it goes above them.
    let homes = leasectl::tui::history_homes(&[location], Some(root));
    update(&mut app, Event::History(leasectl::tui::read_history(&homes, now)));
    let lines = text(&app);
    assert!(lines[0].starts_with("↶ pruned session S1"), "{lines:?}");
    assert!(lines[1].contains("recorded before this console opened"), "{lines:?}");
    assert!(lines[2].starts_with("watching "), "{lines:?}");
    // A profile made now is new.
    crate::common::make_profile(root.join("profiles/late"));
    let later = worker.reload_changed(&[root.join("profiles/late")]);
    update(&mut app, Event::Loaded(later));
    assert!(text(&app).iter().any(|l| l.starts_with("new profile: ") && l.contains("late")), "{:?}", text(&app));
}

/// A host's first listing, after its session was being opened, names the leases it holds
/// as there already: nobody acquired them at that moment (the log said "acquired" for each).
#[test]
fn a_hosts_first_listing_after_connecting_logs_no_acquires() {
    use leasectl::lease::address::host_spec::HostSpec;
    use leasectl::lease::{Error, Location};
    let at = Location::on_host(HostSpec::parse("gw1=ssh://gw1").expect("spec"), "root".into());
    let mut connecting = snap(&at, None, Ok(vec![]));
    connecting.leases = Err(Error::Connecting { host: "gw1".into() });
    let mut app = app(vec![connecting]);
    let held = alive(entry("a1000000000000000000000000000001", "S-held", "cli", 4101, 600.0, None), "hermes");
    update(&mut app, loaded(vec![snap(&at, Some(8), Ok(vec![held.clone()]))]));
    let text: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    // Connecting at the start, then answering, is no news (the banner said CONNECTING).
    assert!(!text.iter().any(|l| l.starts_with("host-")), "{text:?}");
    assert!(!text.iter().any(|l| l.starts_with("acquired")), "{text:?}");
    // Its cap was never known before: read now, not changed now.
    assert!(!text.iter().any(|l| l.starts_with("cap-changed")), "{text:?}");
    // Once read, a new lease is acquired.
    let new = alive(entry("b2000000000000000000000000000002", "S-new", "cli", 4102, 1.0, None), "hermes");
    update(&mut app, loaded(vec![snap(&at, Some(8), Ok(vec![held, new]))]));
    let text: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    assert!(text.iter().any(|l| l.starts_with("acquired: session S-new")), "{text:?}");
}

/// Other hosts' recorded history comes later than this host's (read there): it joins the
/// first part in time order, under one separator, above the live lines.
#[test]
fn a_later_history_part_joins_the_first_in_time_order_under_one_separator() {
    use leasectl::tui::event::{History, HistoryLine};
    let mut app = app(vec![mixed_root()]);
    app.log("root", leasectl::tui::event::LogLevel::Info, "live one");
    let line = |at: f64, profile: &str, text: &str| HistoryLine { at, profile: profile.into(), text: text.into() };
    let here = History {
        lines: vec![line(NOW - 300.0, "root", "here 300"), line(NOW - 100.0, "root", "here 100")],
        warnings: vec![],
    };
    update(&mut app, Event::History(here));
    app.log("root", leasectl::tui::event::LogLevel::Info, "live two");
    let there = History {
        lines: vec![line(NOW - 200.0, "gw1:root", "there 200"), line(NOW - 50.0, "gw1:root", "there 50")],
        warnings: vec!["gw2:root: no recorded history: host gw2 is unreachable".into()],
    };
    update(&mut app, Event::History(there));
    let text: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(
        text,
        [
            "gw2:root: no recorded history: host gw2 is unreachable",
            "↶ here 300",
            "↶ there 200",
            "↶ here 100",
            "↶ there 50",
            "— above: recorded before this console opened (↶); below: live —",
            "watching /home/op/.hermes/runtime/active_sessions.json (4 leases)",
            "live one",
            "live two",
        ]
    );
}

/// On etcd the console logs the watch's events: a lease gone is named as its ender marked
/// it, and this console's own removal is said once (by its action's line), even when the
/// watch's event comes before the action's answer.
#[test]
fn etcd_watch_events_are_logged_once_and_the_consoles_own_removal_not_twice() {
    use leasectl::lease::{Ending, EtcdLocation, Location, RemoteChange};
    let at = Location::Etcd(Box::new(EtcdLocation::parse("http://10.0.0.5:2379", None).expect("a location")));
    let mut app = app(vec![snap(&at, None, Ok(vec![]))]);
    let view = |lease: &str, session: &str| leasectl::lease::LeaseView {
        entry: entry(lease, session, "cli", 4242, 10.0, None),
        liveness: Liveness::Alive,
        remote: None,
    };
    let me = leasectl::lease::home::audit::who();
    let changes = vec![
        RemoteChange::Put { revision: 5, view: view("a1000000000000000000000000000001", "S1"), created: true },
        RemoteChange::Deleted {
            revision: 6,
            view: view("a1000000000000000000000000000001", "S1"),
            ended: Ending::Expired,
        },
        RemoteChange::Deleted {
            revision: 7,
            view: view("b2000000000000000000000000000002", "S2"),
            ended: Ending::ForceReleased { by: "ops@gw (pid 1)".into() },
        },
        RemoteChange::Deleted {
            revision: 8,
            view: view("c3000000000000000000000000000003", "S3"),
            ended: Ending::ForceReleased { by: me },
        },
    ];
    update(&mut app, Event::RemoteChanged(changes));
    let log: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    assert!(log.iter().any(|l| l.starts_with("acquired: session S1")), "{log:?}");
    assert!(log.iter().any(|l| l.starts_with("expired: session S1")), "{log:?}");
    assert!(
        log.iter().any(|l| l.starts_with("force-released: session S2") && l.ends_with("by ops@gw (pid 1)")),
        "{log:?}"
    );
    assert!(!log.iter().any(|l| l.contains("session S3")), "this console's own removal, said by its action: {log:?}");
}

/// Who has the keys is one mode, in one order: a dialog before a line being typed, a line
/// before the focused log, the log before the table; and a key goes where the mode says
/// (`q` typed into the filter is a letter, not quit; over a dialog it is the dialog's).
#[test]
fn the_mode_says_who_has_the_keys_in_one_order() {
    use leasectl::tui::state::Mode;
    let mut app = app(vec![mixed_root()]);
    assert_eq!(app.mode(), Mode::Table);
    app.log_focus = true;
    assert_eq!(app.mode(), Mode::Log);
    app.tab_input = Some(leasectl::tui::state::TabInput { typed: String::new(), from: 0, found: true });
    assert_eq!(app.mode(), Mode::TabName);
    app.tab_input = None;
    update(&mut app, Event::Key(KeyEvent::new(KeyCode::Char('/'), KeyModifiers::NONE)));
    assert_eq!(app.mode(), Mode::Filter);
    update(&mut app, Event::Key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE)));
    assert!(!app.quit && app.filter_input.as_deref() == Some("q"), "q is typed into the filter");
    app.dialog = Some(Dialog::Help);
    assert_eq!(app.mode(), Mode::Dialog);
    assert!(app.mode().is_modal() && !Mode::Log.is_modal() && !Mode::Table.is_modal());
}

/// A window too small to show the console shows a note, and keys do nothing there but
/// `q` (found at 50x12: `p` then `y` pruned a lease nobody could see); once it fits,
/// keys act again.
#[test]
fn keys_do_not_act_while_the_window_is_too_small_to_show_what_they_act_on() {
    let mut app = app(vec![mixed_root()]);
    update(&mut app, Event::Resize(50, 12));
    for c in ['p', '/', 'e', 'x', 'X', 'F', 'l', 'd', 's', 'T'] {
        let effects = update(&mut app, Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)));
        assert!(effects.is_empty() && app.dialog.is_none() && app.filter_input.is_none(), "{c} acted unseen");
        assert!(!app.log_focus && app.tab_input.is_none() && !app.only_leaks, "{c} changed the view unseen");
    }
    for code in [KeyCode::Enter, KeyCode::Tab, KeyCode::Down, KeyCode::Delete] {
        let before = (app.selected, app.tab, app.show_details);
        let effects = update(&mut app, Event::Key(KeyEvent::new(code, KeyModifiers::NONE)));
        assert!(effects.is_empty() && (app.selected, app.tab, app.show_details) == before, "{code:?} acted unseen");
    }
    // `?` is the one key besides q: the help is text, drawn whole over the note; Esc closes it.
    update(&mut app, Event::Key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE)));
    assert!(matches!(app.dialog, Some(leasectl::tui::state::Dialog::Help)), "? opens the help");
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(50, 12)).expect("terminal");
    terminal.draw(|f| leasectl::tui::view::render(&app, f)).expect("draw");
    let shown = terminal.backend().to_string();
    assert!(
        !shown.contains("Enlarge the window") && shown.contains("Esc closes this help"),
        "the help at 50x12:\n{shown}"
    );
    update(&mut app, Event::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    assert!(app.dialog.is_none(), "Esc closes the help");
    update(&mut app, Event::Resize(120, 40));
    update(&mut app, Event::Key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE)));
    assert!(app.dialog.is_some(), "once it fits, keys act");
    update(&mut app, Event::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    update(&mut app, Event::Resize(50, 12));
    update(&mut app, Event::Key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE)));
    assert!(app.quit, "q quits a window too small");
}

/// `profile` on host `host` (`ssh://host`), as --host names it.
fn at(host: &str, profile: &str) -> Location {
    use leasectl::lease::address::host_spec::HostSpec;
    Location::on_host(HostSpec::parse(&format!("{host}=ssh://{host}")).expect("spec"), profile.into())
}

/// Two hosts' registries, the second host down (issue 39).
fn two_hosts_one_down() -> (Location, Location, leasectl::tui::state::App) {
    use leasectl::lease::{Error, HostFault};
    let (gw1, gw2) = (at("gw1", "root"), at("gw2", "root"));
    let mut down = snap(&gw2, None, Ok(vec![]));
    down.leases =
        Err(Error::Unreachable { host: "gw2".into(), why: "Connection refused".into(), fault: HostFault::Unreachable });
    let stale = dead(entry("d1000000000000000000000000000001", "S-dead", "cli", 4101, 600.0, None));
    let app = app(vec![snap(&gw1, None, Ok(vec![stale])), down]);
    (gw1, gw2, app)
}

/// `p` on the all tab with one host down prunes every registry that reads and names the
/// one it leaves (it refused everything: "the registry is invalid ... repair it first").
#[test]
fn a_prune_on_the_all_tab_acts_where_it_reads_and_names_a_host_down() {
    let (gw1, _, mut app) = two_hosts_one_down();
    app.tab = app.registries.len();
    key(&mut app, KeyCode::Char('p'));
    match &app.dialog {
        Some(Dialog::ConfirmPrune { targets, skipped, .. }) => {
            assert_eq!(targets.iter().map(|(l, _)| l.label()).collect::<Vec<_>>(), ["gw1:root"]);
            assert_eq!(skipped.len(), 1, "{skipped:?}");
            assert!(skipped[0].starts_with("gw2:root") && skipped[0].contains("unreachable"), "{skipped:?}");
        }
        other => panic!("expected the prune dialog, got {other:?}; log: {:?}", app.log.back()),
    }
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 30)).expect("terminal");
    terminal.draw(|f| leasectl::tui::view::render(&app, f)).expect("draw");
    let screen = terminal.backend().to_string();
    assert!(screen.contains("Not pruned") && screen.contains("gw2:root"), "{screen}");
    assert_eq!(key(&mut app, KeyCode::Char('y')), vec![Effect::Prune { location: gw1 }]);
    // The host's own tab: refused with why in a host's words, not "invalid".
    app.tab = 1;
    key(&mut app, KeyCode::Char('p'));
    let said = app.log.back().map(|l| l.text.clone()).unwrap_or_default();
    assert!(said.contains("prune refused: host gw2 is unreachable") && !said.contains("invalid"), "{said}");
}

/// Over --host: tabs go by host (root first) however the hosts answer, the tab on screen
/// stays; the table has a HOST column filled from each registry's host, and sorting by
/// it groups the hosts.
#[test]
fn tabs_go_by_host_and_the_table_names_each_leases_host() {
    let lease = |id: &str, session: &str| alive(entry(id, session, "cli", 4101, 60.0, None), "hermes");
    let mut app = app(vec![
        snap(&at("gw2", "root"), None, Ok(vec![lease("a2000000000000000000000000000001", "S-a-gw2")])),
        snap(&at("gw1", "root"), None, Ok(vec![lease("b1000000000000000000000000000001", "S-b-gw1")])),
    ]);
    let labels =
        |app: &leasectl::tui::state::App| app.registries.iter().map(|r| r.location.label()).collect::<Vec<_>>();
    assert_eq!(labels(&app), ["gw1:root", "gw2:root"]);
    assert_eq!(app.registries[app.tab].location.label(), "gw2:root", "the first tab, followed to its place");
    // gw1's profile answers late: beside gw1's root, and gw2 stays on screen.
    update(
        &mut app,
        loaded(vec![snap(&at("gw1", "work"), None, Ok(vec![lease("c1000000000000000000000000000001", "S-c-gw1")]))]),
    );
    assert_eq!(labels(&app), ["gw1:root", "gw1:work", "gw2:root"]);
    assert_eq!(app.registries[app.tab].location.label(), "gw2:root", "the tab on screen stays");

    app.tab = app.registries.len();
    let screen = |app: &leasectl::tui::state::App| {
        let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 30)).expect("terminal");
        terminal.draw(|f| leasectl::tui::view::render(app, f)).expect("draw");
        terminal.backend().to_string()
    };
    let text = screen(&app);
    assert!(text.contains("HOST"), "a HOST column: {text}");
    let host_of = |text: &str, session: &str| -> Vec<String> {
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| l.contains(session)).expect("the session's row");
        lines[at + 1].split_whitespace().map(str::to_owned).collect()
    };
    assert!(host_of(&text, "S-a-gw2").contains(&"gw2".to_owned()), "{text}");
    assert!(host_of(&text, "S-c-gw1").contains(&"gw1".to_owned()), "{text}");
    // Sorting by host: gw1's sessions first, whatever their age or name.
    app.sort = SortMode::Host;
    let text = screen(&app);
    let order: Vec<usize> = ["S-b-gw1", "S-c-gw1", "S-a-gw2"].iter().map(|s| text.find(s).expect("shown")).collect();
    assert!(order[0] < order[2] && order[1] < order[2], "by host: {text}");
}

/// The all tab over many hosts, several down: the banner counts and names every host
/// down first (it showed three and stopped, with no count), and the header has an entry
/// a host (live over cap summed, or DOWN), at 80x24.
#[test]
fn the_all_tab_counts_and_names_every_host_down_and_sums_each_host() {
    use leasectl::lease::HostFault;
    let mut snaps = Vec::new();
    for (i, host) in ["gw1", "gw2", "gw3", "gw4", "gw5", "gw6"].iter().enumerate() {
        for profile in ["root", "work"] {
            let mut s = snap(
                &at(host, profile),
                Some(4),
                Ok(vec![alive(
                    entry(
                        &format!("{i}{profile}000000000000000000000000000"),
                        &format!("S-{host}-{profile}"),
                        "cli",
                        4100,
                        60.0,
                        None,
                    ),
                    "hermes",
                )]),
            );
            if i % 2 == 1 {
                s.leases = Err(Error::Unreachable {
                    host: (*host).into(),
                    why: "ssh could not connect or log in (Connection refused)".into(),
                    fault: HostFault::Unreachable,
                });
            }
            snaps.push(s);
        }
    }
    let mut app = app(snaps);
    app.tab = app.registries.len();
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).expect("terminal");
    terminal.draw(|f| leasectl::tui::view::render(&app, f)).expect("draw");
    let screen = terminal.backend().to_string();
    assert!(screen.contains("3 HOSTS DOWN: gw2, gw4, gw6"), "{screen}");
    assert!(screen.contains("gw1 2/8  gw2 down +4 hosts"), "an entry a host, what does not fit counted: {screen}");
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 30)).expect("terminal");
    terminal.draw(|f| leasectl::tui::view::render(&app, f)).expect("draw");
    let screen = terminal.backend().to_string();
    assert!(screen.contains("gw1 2/8  gw2 down  gw3 2/8  gw4 down  gw5 2/8  gw6 down"), "{screen}");
    assert!(screen.contains("not counted: 6 registries"), "{screen}");
    assert!(!screen.contains("gw1:root 1/4"), "not one a registry: {screen}");
}

/// What a remote store says beside its leases: lag and silent members from each
/// reading, the line and the slots from the last good one; a registry file says none.
#[test]
fn a_remote_stores_line_and_slots_stay_from_its_last_good_reading() {
    let waiter = leasectl::lease::Waiter {
        session_id: "Q".into(),
        pid: 42,
        host: "other".into(),
        surface: None,
        since: NOW - 5.0,
        cap: Some(2),
        position: 7,
        key: "/leases/q/7".into(),
    };
    let reg = Location::File(leasectl::lease::Registry::new("root", "/h"));
    let mut good = snap(&reg, Some(2), Ok(vec![]));
    good.waiting = vec![waiter.clone()];
    good.slots_used = Some(2);
    good.lag = Some(std::time::Duration::from_secs(3));
    good.not_answering = vec![("m1".into(), "timed out".into())];
    let mut app = app(vec![good]);
    let r = &app.registries[0];
    assert_eq!(
        (r.waiting(), r.slots_in_use(), r.lag()),
        (&[waiter.clone()][..], 2, Some(std::time::Duration::from_secs(3)))
    );
    assert_eq!(r.not_answering(), &[("m1".to_owned(), "timed out".to_owned())]);
    // A failed reading: its own lag and members, the last line and slots kept.
    update(&mut app, loaded(vec![snap(&reg, Some(2), Err("etcd: no answer".into()))]));
    let r = &app.registries[0];
    assert_eq!((r.waiting(), r.slots_in_use(), r.lag()), (&[waiter][..], 2, None));
    assert!(r.not_answering().is_empty());
    // A good reading with none of it: nothing is left.
    update(&mut app, loaded(vec![snap(&reg, Some(2), Ok(vec![]))]));
    let r = &app.registries[0];
    assert_eq!((r.waiting(), r.slots_in_use(), r.lag(), r.not_answering()), (&[][..], 0, None, &[][..]));
}

/// A home of many profiles: the first read names the first ones in the log, one line
/// each, and counts the rest in one line per read; a later read names no more. 100,000
/// profiles gave as many lines, and the log (10,000 lines) held nothing else.
#[test]
fn many_registries_read_at_once_are_counted_in_one_line_past_the_first_ones() {
    let first = leasectl::tui::state::WATCHING_LINES;
    let held = alive(entry("a1000000000000000000000000000001", "S-held", "cli", 4101, 600.0, None), "hermes");
    let snapshots: Vec<_> = (0..first + 70)
        .map(|i| {
            let leases = if i == first + 3 { vec![held.clone()] } else { vec![] };
            snap(&registry(&format!("p{i}")), None, Ok(leases))
        })
        .collect();
    let app = app(snapshots);
    let text: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    let named = text.iter().filter(|l| l.starts_with("watching /")).count();
    assert_eq!(named, first, "{text:?}");
    assert!(text.contains(&"watching 70 more registries (1 lease); each has its tab"), "{text:?}");
    assert_eq!(app.registries.len(), first + 70, "every registry is still followed");
    // A profile made later is news: named, as it always was.
    let mut app = app;
    let late = snap(&registry("late"), None, Ok(vec![]));
    update(&mut app, loaded(vec![late]));
    let text: Vec<&str> = app.log.iter().map(|l| l.text.as_str()).collect();
    let last = text.len() - 2;
    assert!(text[last].starts_with("new profile: ") && text[last + 1].starts_with("watching /"), "{text:?}");
}

/// The end of a large first read is said (at 100,000 profiles it comes seconds after the
/// first screen); a later full read of as many is not news.
#[test]
fn the_end_of_a_large_first_read_is_said_once() {
    let snaps = || (0..3).map(|i| snap(&registry(&format!("p{i}")), None, Ok(vec![]))).collect::<Vec<_>>();
    let mut app = app(vec![]);
    let read =
        |initial| Loaded { at: NOW, first: 0, initial, snapshots: snaps(), large_read_done: true, owners_moved: None };
    update(&mut app, Event::Loaded(read(true)));
    update(&mut app, Event::Loaded(read(false)));
    let done: Vec<&str> =
        app.log.iter().map(|l| l.text.as_str()).filter(|t| t.starts_with("first read done")).collect();
    assert_eq!(done, ["first read done: 3 registries"]);
}

/// An owner's CPU and memory figures that moved reach every row it holds here, with no
/// registry judged again; a dead owner's row and an owner on another host keep theirs.
#[test]
fn moved_owner_figures_reach_the_rows_of_owners_on_this_host_only() {
    use std::collections::HashMap;
    use std::sync::Arc;
    let root = registry("root");
    let held = entry("aaaa1111aaaa1111aaaa1111aaaa1111", "S-1", "cli", 4242, 30.0, None);
    let also = entry("bbbb2222bbbb2222bbbb2222bbbb2222", "S-2", "cli", 4242, 20.0, None);
    let gone = entry("cccc3333cccc3333cccc3333cccc3333", "S-3", "cli", 4242, 10.0, None);
    let elsewhere = entry("dddd4444dddd4444dddd4444dddd4444", "S-4", "cli", 4242, 5.0, None);
    let mut far = alive(elsewhere, "hermes");
    far.host = Some(Arc::from("another-host"));
    let rows = vec![alive(held, "hermes"), alive(also, "hermes"), dead(gone), far];
    let mut app = app(vec![snap(&root, None, Ok(rows))]);
    let mut now = owner("hermes");
    now.cpu_percent = 77.0;
    now.rss_bytes = 900 * 1024 * 1024;
    let owners = Arc::new(HashMap::from([(4242, Arc::new(now))]));
    let moved = Loaded {
        at: NOW + 5.0,
        first: 0,
        initial: false,
        snapshots: vec![],
        large_read_done: false,
        owners_moved: Some(owners),
    };
    update(&mut app, Event::Loaded(moved));
    let figures: Vec<Option<(f32, u64)>> =
        app.registries[0].leases.iter().map(|l| l.owner.as_ref().map(|o| (o.cpu_percent, o.rss_bytes))).collect();
    let before = Some((1.5, 48 * 1024 * 1024));
    let after = Some((77.0, 900 * 1024 * 1024));
    assert_eq!(figures, [after, after, None, before]);
}
