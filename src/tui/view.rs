//! Rendering: a pure function of `App`. No I/O, no clock reads.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Gauge, Paragraph, Sparkline, Tabs, Wrap};

use super::columns::{BADGE, Columns, HEADERS, Widest};
use super::event::LeaseRow;
use super::event::LogLevel;
use super::keys::{Binding, CONSOLE_KEYS, KeyRow, filter_hint, footer_entries};
use super::layout::{areas, table_offset, too_small};
use super::state::{App, Row};
use super::style::{Palette, badge, shown_text};
use super::time;
use crate::lease::format::pyjson;
use crate::lease::home::context::{ContextRef, Contexts};
use crate::lease::{Liveness, Location};

/// The banner's height: it wraps (the validation error is quoted whole), at most 6 lines.
pub fn banner_height(lines: &[Line<'static>], width: u16) -> u16 {
    // Counted as drawn: wrapped at words, which takes more rows than the characters
    // divided by the width (an 80-column banner lost its last line that way).
    let drawn = Paragraph::new(lines.to_vec()).wrap(Wrap { trim: false }).line_count(width.max(1));
    drawn.min(6) as u16
}

/// The tab bar in `width` columns: the tabs round the selected one, and markers.
pub fn tab_bar(app: &App, width: u16) -> super::layout::TabBar {
    let count = app.registries.len() + usize::from(app.has_all_tab());
    super::layout::tab_bar(count, app.tab, width, |i| match app.registries.get(i) {
        Some(r) => {
            let mark = if r.error().is_some() { " !" } else { "" };
            format!("{}{mark}", shown_text(&r.location.label()))
        }
        None => "all".into(),
    })
}

pub fn render(app: &App, frame: &mut Frame) {
    let p = Palette { no_color: app.no_color };
    let area = frame.area();
    if let Some((need_w, need_h)) = too_small(app, area) {
        // The help, asked for with `?`, is text: it is drawn whole (it scrolls) over the note.
        if let Some(d @ super::state::Dialog::Help) = &app.dialog {
            super::dialog_view::render_dialog(app, d, &p, frame, area);
            return;
        }
        // What it is, what it needs, and the way out: keys do nothing else until it fits.
        let what = app.extension.as_ref().map_or("the console", |x| x.name());
        let note = format!(
            "leasectl: {what} needs {need_w}x{need_h}; now {}x{}. Enlarge the window, or press q to quit (? help).",
            area.width, area.height
        );
        let para = Paragraph::new(note).alignment(ratatui::layout::Alignment::Center).wrap(Wrap { trim: true });
        let height = (para.line_count(area.width) as u16).min(area.height);
        let y = area.y + area.height.saturating_sub(height) / 2;
        frame.render_widget(para, Rect { y, height, ..area });
        return;
    }
    let banner_lines = banner_lines(app);
    let areas = areas(app, area, banner_height(&banner_lines, area.width));
    if let Some(ext) = &app.extension {
        ext.render_panel(app.no_color, frame, areas.panel);
    }
    render_tabs(app, &p, frame, areas.tabs);
    render_header(app, &p, frame, areas.header);
    if !banner_lines.is_empty() {
        frame.render_widget(Paragraph::new(banner_lines).style(p.alert()).wrap(Wrap { trim: false }), areas.banner);
    }
    render_table(app, &p, frame, areas.table);
    if let Some(details) = areas.details {
        render_details(app, &p, frame, details);
    }
    if let Some(log) = areas.log {
        render_log(app, &p, frame, log);
    }
    render_footer(app, &p, frame, areas.footer);
    if let Some(d) = &app.dialog {
        super::dialog_view::render_dialog(app, d, &p, frame, area);
    }
    if let Some(ext) = &app.extension {
        ext.render_overlay(app.no_color, frame, area);
    }
}

fn render_tabs(app: &App, p: &Palette, frame: &mut Frame, area: Rect) {
    let bar = tab_bar(app, area.width);
    let selected = bar.selected(app.tab);
    let titles: Vec<Line> = bar.titles.into_iter().map(Line::from).collect();
    let tabs = Tabs::new(titles)
        .select(selected)
        .highlight_style(p.bold(Color::Cyan).add_modifier(Modifier::REVERSED))
        .divider("│");
    frame.render_widget(tabs, area);
}

fn render_header(app: &App, p: &Palette, frame: &mut Frame, area: Rect) {
    let block = Block::default().borders(Borders::ALL).title(" leasectl ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    // A column between the text and the gauge: a long path never runs into it.
    let cols = Layout::horizontal([Constraint::Min(30), Constraint::Length(1), Constraint::Length(24)]).split(inner);
    let regs = app.tab_registries();
    let unreadable: Vec<String> =
        regs.iter().filter(|r| app.registries[**r].unknown()).map(|r| app.registries[*r].location.label()).collect();
    // Nothing could be read: zeros would say "nobody holds anything", which is not known.
    let none_read = !regs.is_empty() && regs.len() == unreadable.len();
    let last = regs
        .iter()
        .filter_map(|r| app.registries[*r].last_change)
        .reduce(f64::max)
        .map(|t| time::clock(t, app.now, &app.tz))
        .unwrap_or_else(|| "-".into());
    let lines = vec![
        // Cut from the left: the end of a path (profile, file) says which registry it is.
        Line::from(fit_left(&where_text(app, &regs), usize::from(cols[0].width))),
        counts_line(app, p, &regs, &unreadable, none_read),
        {
            let changed = format!("changed {last}  ·  ");
            let width = usize::from(cols[0].width);
            let room = width.saturating_sub(changed.chars().count());
            let mut line = Line::from(format!("{changed}{}", cap_text(app, &regs, room)));
            // Who waits in line (etcd), in what room is left: named in full, else counted.
            let left = width.saturating_sub(line.width());
            if let Some(text) = waiting_text(app, &regs, left) {
                line.push_span(Span::styled(text, p.fg(Color::Cyan)));
            }
            line
        },
    ];
    frame.render_widget(Paragraph::new(lines), cols[0]);
    render_slots(app, p, &regs, none_read, frame, cols[2]);
}

/// `text` in `width` columns: whole when it fits, else its end after a `…`.
fn fit_left(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width || width == 0 {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(count - (width - 1)).collect();
    format!("…{tail}")
}

/// Which registry the tab shows, or how many under which home.
fn where_text(app: &App, regs: &[usize]) -> String {
    if let [one] = regs {
        let r = &app.registries[*one];
        // Only a registry that was read can be known to have no file (not a host unreached).
        let missing = if r.exists || !r.loaded || r.error().is_some() { "" } else { " (no file yet)" };
        format!("{}{missing}", shown_text(&r.location.describe()))
    } else if app.registries[0].location.host().is_some() {
        let mut hosts: Vec<&str> =
            regs.iter().filter_map(|r| app.registries[*r].location.host()).map(|h| h.name.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        format!("{} registries on {}", regs.len(), crate::lease::words::human::plural(hosts.len(), "host", "hosts"))
    } else {
        format!("{} registries under {}", regs.len(), home_of(&app.registries[0].location))
    }
}

/// The owners by verdict (the registries that could not be read named, not counted).
fn counts_line(app: &App, p: &Palette, regs: &[usize], unreadable: &[String], none_read: bool) -> Line<'static> {
    if none_read {
        return Line::from(Span::styled("leases unknown: cannot be read (see below)", p.bold(Color::Red)));
    }
    let (mut alive, mut dead, mut recycled, mut unknown, mut work, mut hidden) = (0, 0, 0, 0, 0, 0);
    for l in regs.iter().flat_map(|r| &app.registries[*r].leases) {
        match l.liveness {
            Liveness::Alive | Liveness::AliveInNamespace(_) => alive += 1,
            Liveness::Dead(_) => dead += 1,
            Liveness::Recycled { .. } => recycled += 1,
            Liveness::Unknown(crate::lease::owners::liveness::UnknownCause::Hidden(_)) => hidden += 1,
            Liveness::Unknown(_) => unknown += 1,
            Liveness::WorkRunning { .. } => work += 1,
        }
    }
    let mut counts = Line::from(vec![
        Span::styled(format!("● {alive} alive  "), p.fg(Color::Green)),
        Span::styled(format!("✖ {dead} dead  "), p.fg(Color::Red)),
        Span::styled(format!("♻ {recycled} recycled  "), p.fg(Color::Magenta)),
    ]);
    // Owners /proc hides from this user are not dead ones (their details say why): counted
    // where the unknown are, which they are a kind of (the line shares 80 columns with the
    // slots gauge).
    match (unknown, hidden) {
        (_, 0) => counts.push_span(Span::styled(format!("? {unknown} unknown"), p.fg(Color::Yellow))),
        (0, _) => counts.push_span(Span::styled(format!("◌ {hidden} hidden"), p.fg(Color::Yellow))),
        _ => counts.push_span(Span::styled(format!("? {unknown} unknown  ◌ {hidden} hidden"), p.fg(Color::Yellow))),
    }
    // Many: counted (the banner names them); a list would run off the line.
    let not_counted = match unreadable.len() {
        0 => None,
        1 | 2 => Some(unreadable.join(", ")),
        n => Some(format!("{n} registries (below)")),
    };
    if let Some(what) = not_counted {
        counts.push_span(Span::styled(format!("  not counted: {what}"), p.fg(Color::Red)));
    }
    // Only when there is one: a dead `run` owner whose work still runs.
    if work > 0 {
        counts.push_span(Span::styled(format!("  ⚙ {work} WORK RUNNING"), p.fg(Color::Yellow)));
    }
    counts
}

/// Who waits in line (etcd `--wait`) in `width` columns: how many and the first (the
/// log names each), else how many.
fn waiting_text(app: &App, regs: &[usize], width: usize) -> Option<String> {
    let line: Vec<&crate::lease::Waiter> = regs.iter().flat_map(|r| app.registries[*r].waiting()).collect();
    let first = line.iter().min_by(|a, b| a.since.total_cmp(&b.since))?;
    let count = format!("  ·  ⧗ {} waiting", line.len());
    let named = format!(
        "{count} (first: {} pid {}, {})",
        shown_text(&first.session_id),
        first.pid,
        time::age(app.now - first.since)
    );
    [named, count].into_iter().find(|t| t.chars().count() <= width)
}

/// The cap of one registry, or each registry's live leases over its cap in `width`
/// columns: when not all fit, those over their cap first, and how many more there are.
fn cap_text(app: &App, regs: &[usize], width: usize) -> String {
    if let [one] = regs {
        let reg = &app.registries[*one];
        return match reg.cap {
            Some(c) => format!("cap {c}"),
            // Never read (a host not reached): whether there is a cap is not known.
            None if reg.unknown() => "cap unknown".to_owned(),
            None => "no cap".to_owned(),
        };
    }
    let on_hosts = regs.iter().all(|r| app.registries[*r].location.host().is_some());
    let (one, many) = if on_hosts { ("host", "hosts") } else { ("registry", "registries") };
    let mut each: Vec<(bool, String)> = if on_hosts {
        host_caps(app, regs)
    } else {
        regs.iter()
            .map(|r| {
                let reg = &app.registries[*r];
                let cap = reg.cap.map(|c| c.to_string()).unwrap_or_else(|| "-".into());
                // Over its cap said in words here too, where no gauge shows this registry alone.
                let over = reg.cap.is_some_and(|c| c > 0 && reg.live_count() > c);
                let word = if over { " OVER CAP" } else { "" };
                (over, format!("{} {}/{cap}{word}", reg.location.label(), reg.live_count()))
            })
            .collect()
    };
    let all = each.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("  ");
    if all.chars().count() <= width {
        return all;
    }
    each.sort_by_key(|(over, _)| !*over);
    let mut shown = String::new();
    for (i, (_, text)) in each.iter().enumerate() {
        let more = format!("+{}", crate::lease::words::human::plural(each.len() - i, one, many));
        let next = if shown.is_empty() { text.clone() } else { format!("{shown}  {text}") };
        let rest = each.len() - i - 1;
        let tail = if rest > 0 {
            format!(" +{}", crate::lease::words::human::plural(rest, one, many)).chars().count()
        } else {
            0
        };
        if next.chars().count() + tail > width {
            return if shown.is_empty() { more } else { format!("{shown} {more}") };
        }
        shown = next;
    }
    shown
}

/// Over --host, one entry a host: its registries' live leases over their caps summed
/// (`-` when one has none), or the word for its state (DOWN, LAGGING); those over a cap or
/// down come first when not all fit.
fn host_caps(app: &App, regs: &[usize]) -> Vec<(bool, String)> {
    let mut hosts: Vec<(&str, Vec<usize>)> = Vec::new();
    for r in regs {
        let Some(host) = app.registries[*r].location.host() else { continue };
        match hosts.iter_mut().find(|(h, _)| *h == host.name) {
            Some((_, rs)) => rs.push(*r),
            None => hosts.push((host.name.as_str(), vec![*r])),
        }
    }
    hosts
        .into_iter()
        .map(|(host, rs)| {
            let states: Vec<&super::state::RegistryState> = rs.iter().map(|r| &app.registries[*r]).collect();
            let down = states.iter().all(|s| s.error().is_some_and(crate::lease::Error::unanswered));
            // Named in the banner too: kept in its place here.
            if down {
                return (false, format!("{} down", shown_text(host)));
            }
            let live: u64 = states.iter().map(|s| s.live_count()).sum();
            let caps: Option<u64> = states.iter().map(|s| s.cap).sum();
            let over = states.iter().any(|s| s.cap.is_some_and(|c| c > 0 && s.live_count() > c));
            let cap = caps.map_or_else(|| "-".to_owned(), |c| c.to_string());
            let word = if over {
                " OVER CAP"
            } else if states.iter().any(|s| s.lag().is_some()) {
                " LAGGING"
            } else {
                ""
            };
            (over, format!("{} {live}/{cap}{word}", shown_text(host)))
        })
        .collect()
}

/// The slots gauge and the live leases' history, scaled to the cap when there is one.
fn render_slots(app: &App, p: &Palette, regs: &[usize], none_read: bool, frame: &mut Frame, area: Rect) {
    let right = Layout::vertical([Constraint::Length(1), Constraint::Length(2)]).split(area);
    // Registries with a cap are summed against their caps; those without one are counted
    // beside them (one empty profile without a cap must not hide the others' full caps).
    let live = |r: &usize| app.registries[*r].live_count();
    // On etcd the slots are the slot keys: a lease taken without --max holds none.
    let slots = |r: &usize| app.registries[*r].slots_in_use();
    let (capped, uncapped): (Vec<usize>, Vec<usize>) = regs.iter().partition(|r| app.registries[**r].cap.is_some());
    let used: u64 = capped.iter().map(slots).sum();
    let beside: u64 =
        uncapped.iter().map(live).sum::<u64>() + capped.iter().map(|r| live(r).saturating_sub(slots(r))).sum::<u64>();
    let cap = (!capped.is_empty()).then(|| capped.iter().filter_map(|r| app.registries[*r].cap).sum::<u64>());
    let beside_text = if beside == 0 { String::new() } else { format!(" +{beside} no cap") };
    match cap {
        _ if none_read => frame.render_widget(Paragraph::new("slots unknown"), right[0]),
        Some(cap) if cap > 0 => {
            let ratio = (used as f64 / cap as f64).clamp(0.0, 1.0);
            // The colour's meaning in words too (NO_COLOR, a colour-blind reader).
            let state = match used.cmp(&cap) {
                std::cmp::Ordering::Greater => " OVER CAP",
                std::cmp::Ordering::Equal => " FULL",
                std::cmp::Ordering::Less => "",
            };
            // A registry over its own cap is said even when the sum is not over.
            let over = capped.iter().filter(|r| app.registries[**r].cap.is_some_and(|c| c > 0 && slots(r) > c)).count();
            let state = if state.is_empty() && over > 0 { format!(" {over} OVER CAP") } else { state.to_owned() };
            let color = if used >= cap || over > 0 { Color::Red } else { Color::Green };
            let mut label = format!("slots {used}/{cap}{state}{beside_text}");
            if label.chars().count() > usize::from(right[0].width) {
                label = label.trim_start_matches("slots ").to_owned();
            }
            let gauge = Gauge::default().ratio(ratio).label(label).gauge_style(p.fg(color));
            frame.render_widget(gauge, right[0]);
        }
        _ => frame.render_widget(Paragraph::new(format!("slots {} live, no cap", used + beside)), right[0]),
    }
    let width = right[1].width as usize;
    let history: Vec<u64> = if let [one] = regs {
        app.registries[*one].history.last(app.ticks, width)
    } else {
        // Summed by tick, the newest at the right (a registry found later has fewer).
        let mut sum = vec![0u64; width.min(super::samples::HISTORY_LEN as usize)];
        for r in regs {
            let samples = app.registries[*r].history.last(app.ticks, sum.len());
            let offset = sum.len() - samples.len();
            for (slot, v) in sum[offset..].iter_mut().zip(samples) {
                *slot += v;
            }
        }
        let sampled = regs.iter().map(|r| app.registries[*r].history.len(app.ticks)).max().unwrap_or(0);
        sum.split_off(sum.len() - sampled.min(sum.len()))
    };
    // Scaled to the cap when there is one, so a full bar means full slots.
    let mut spark = Sparkline::default().data(&history).style(p.fg(Color::Cyan));
    if let Some(cap) = cap.filter(|c| *c > 0) {
        spark = spark.max(cap);
    }
    frame.render_widget(spark, right[1]);
}

/// What a banner calls a registry that cannot be read, in its own words.
fn unreadable_title(location: &Location, e: &crate::lease::Error, since: &str) -> String {
    match location {
        Location::Etcd(_) => format!("ETCD UNREACHABLE{since}"),
        // The link's own words for a host it cannot reach (else the remote's error).
        Location::Ssh(_) if matches!(e, crate::lease::Error::Unreachable { .. }) => {
            let fault = if let crate::lease::Error::Unreachable { fault, .. } = e { fault.title() } else { "" };
            format!("{fault}{since}")
        }
        Location::Ssh(_) if matches!(e, crate::lease::Error::Connecting { .. }) => format!("CONNECTING{since}"),
        Location::Ssh(_) => format!("CANNOT READ{since}"),
        Location::File(_) => "INVALID REGISTRY".into(),
    }
}

/// Several hosts down: counted and named in one line, first, so a banner cut at its
/// height still says every one.
fn hosts_down(app: &App, tab: &[usize]) -> Option<Line<'static>> {
    let mut down: Vec<&str> = tab
        .iter()
        .map(|r| &app.registries[*r])
        .filter(|r| matches!(r.error(), Some(crate::lease::Error::Unreachable { .. })))
        .filter_map(|r| r.location.host().map(|h| h.name.as_str()))
        .collect();
    down.dedup();
    (down.len() > 1).then(|| {
        let names: Vec<String> = down.iter().map(|h| shown_text(h)).collect();
        Line::from(format!(" {} HOSTS DOWN: {} — the others are live; r tries them now", down.len(), names.join(", ")))
    })
}

/// The banner's lines: each registry that cannot be read, or is locked, said; a host
/// that cannot be reached or lags (--host) is said once, for all its registries.
pub fn banner_lines(app: &App) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let tab = app.tab_registries();
    out.extend(hosts_down(app, &tab));
    // What a host's line said already: (host, what).
    let mut hosts_said: Vec<(String, &'static str)> = Vec::new();
    let host_line = |reg: &super::state::RegistryState, what: &'static str, said: &mut Vec<(String, &'static str)>| {
        let host = reg.location.host()?.name.clone();
        if said.contains(&(host.clone(), what)) {
            return Some(None);
        }
        said.push((host.clone(), what));
        let same = |r: &super::state::RegistryState| {
            r.location.host().is_some_and(|h| h.name == host)
                && match what {
                    "lag" => r.lag().is_some() && r.error().is_none(),
                    "version" => r.other_version().is_some() && r.error().is_none(),
                    _ => matches!(
                        r.error(),
                        Some(crate::lease::Error::Unreachable { .. } | crate::lease::Error::Connecting { .. })
                    ),
                }
        };
        let n = tab.iter().filter(|i| same(&app.registries[**i])).count();
        Some(Some(if n > 1 { format!("{host}: {n} registries") } else { reg.location.label() }))
    };
    for &r in &tab {
        let reg = &app.registries[r];
        if let Some(e) = reg.error() {
            let since =
                reg.error_since().map(|t| format!(" since {}", time::clock(t, app.now, &app.tz))).unwrap_or_default();
            let unanswered =
                matches!(e, crate::lease::Error::Unreachable { .. } | crate::lease::Error::Connecting { .. });
            let label = match unanswered.then(|| host_line(reg, "down", &mut hosts_said)).flatten() {
                Some(None) => None,
                Some(Some(label)) => Some(label),
                None => Some(reg.location.label()),
            };
            if let Some(label) = label {
                let what = unreadable_title(&reg.location, e, &since);
                let shows = if reg.ever_read {
                    "showing the last good snapshot (STALE)"
                } else {
                    "it has not been read since the console opened: its leases are unknown"
                };
                out.push(Line::from(format!(
                    " {what} ({}): {} — {shows}; nothing is rewritten",
                    shown_text(&label),
                    shown_text(&crate::lease::words::hint::hinted(&reg.location, &e.to_string()))
                )));
            }
        }
        for (member, why) in reg.not_answering().iter().filter(|_| reg.error().is_none()) {
            out.push(Line::from(format!(
                " ETCD MEMBER NOT ANSWERING: {} ({}) — requests go to those that answer",
                shown_text(member),
                shown_text(why)
            )));
        }
        if let Some(lag) = reg.lag().filter(|_| reg.error().is_none())
            && let Some(Some(label)) = host_line(reg, "lag", &mut hosts_said)
        {
            out.push(Line::from(format!(
                " HOST LAGGING ({}): its answers take {:.1} s — what is shown may be that late",
                shown_text(&label),
                lag.as_secs_f64()
            )));
        }
        if let Some(version) = reg.other_version().filter(|_| reg.error().is_none())
            && let Some(host) = reg.location.host()
            && let Some(Some(label)) = host_line(reg, "version", &mut hosts_said)
        {
            out.push(other_version_line(version, &label, host));
        }
        out.extend(not_a_profile_line(reg));
        out.extend(pid_namespaces_line(reg));
        out.extend(lock_line(reg, app));
    }
    out.extend(app.inside_container.map(inside_a_container_line));
    out
}

/// This console runs in a pid namespace that is not the host's: what it cannot see.
fn inside_a_container_line(ns: u64) -> Line<'static> {
    Line::from(format!(
        " INSIDE A CONTAINER (pid:[{ns}]): owners outside this pid namespace are invisible here and look dead — run \
         leasectl on the host to see them"
    ))
}

/// A registry whose live owners run in more than one pid namespace: Hermes in one drops
/// the others' leases on its next write.
fn pid_namespaces_line(reg: &super::state::RegistryState) -> Option<Line<'static>> {
    let here = reg.leases.iter().filter(|l| l.host.is_none()).map(|l| &l.liveness);
    let shares = crate::lease::view::pid_namespaces_of(here);
    (!shares.is_empty()).then(|| {
        let places: Vec<String> = shares.iter().map(|s| shown_text(&s.place)).collect();
        Line::from(format!(
            " PID NAMESPACES ({}): live owners in {} — Hermes in one drops the others' leases; run them in one",
            shown_text(&reg.location.label()),
            places.join(", ")
        ))
    })
}

/// A registry left where no profile is (deleted, no identity): why its tab is there.
fn not_a_profile_line(reg: &super::state::RegistryState) -> Option<Line<'static>> {
    let place = reg.location.registry().filter(|r| !r.standing.is_live())?;
    Some(Line::from(format!(
        " NOT A LIVE PROFILE: {}, {}; shown while its registry holds leases",
        shown_text(&place.profile),
        shown_text(&place.standing.short(&place.profile))
    )))
}

/// A host that runs another leasectl (same protocol), with what puts this build there.
fn other_version_line(version: &str, label: &str, host: &crate::lease::address::host_spec::HostSpec) -> Line<'static> {
    Line::from(format!(
        " HOST RUNS leasectl {} ({}), this is {}: `{}` puts this build there",
        shown_text(version),
        shown_text(label),
        env!("CARGO_PKG_VERSION"),
        shown_text(&crate::lease::install_line(host))
    ))
}

/// Who holds the registry's lock: for long (actions wait for it), or at all.
fn lock_line(reg: &super::state::RegistryState, app: &App) -> Option<Line<'static>> {
    if let Some((holder, held)) = reg.stuck_lock(app.now) {
        // A command name is whatever the process chose: no control characters on screen.
        let clean = |c: &str| c.chars().filter(|ch| !ch.is_control()).collect::<String>();
        let command = holder.command.as_deref().map(|c| format!(" ({})", clean(c))).unwrap_or_default();
        return Some(Line::from(format!(
            " registry {} locked by pid {}{command} for {} — actions wait for it, then give up",
            reg.location.label(),
            holder.pid,
            time::age(held)
        )));
    }
    reg.locked_by.map(|pid| Line::from(format!(" registry {} locked by pid {pid}", reg.location.label())))
}

/// The widest cells of the lease rows on this tab (lengths only: cheap for thousands).
fn widest(app: &App, rows: &[Row]) -> Widest {
    let mut w = Widest { started: 8, ..Widest::default() };
    let today = time::day_start(app.now, &app.tz);
    for row in rows {
        if let Row::Lease { registry, lease } = row {
            let l = &app.registries[*registry].leases[*lease];
            let e = &l.entry;
            w.surface = w.surface.max(e.surface().unwrap_or("-").chars().count());
            w.pid = w.pid.max(e.pid().to_string().len());
            w.owner = w.owner.max(owner_of(l).chars().count());
            w.live_id = w.live_id.max(e.live_session_id().chars().count());
            w.host = w.host.max(host_of(app, *registry, l).map_or(0, |h| h.chars().count()));
            if e.process_start_time().is_some_and(|t| t < today) {
                w.started = 11;
            }
        }
    }
    w
}

/// The host a lease is on: etcd's lease names its own; over --host, its registry's host.
fn host_of<'a>(app: &'a App, registry: usize, l: &'a LeaseRow) -> Option<&'a str> {
    l.host.as_deref().or_else(|| app.registries[registry].location.host().map(|h| h.name.as_str()))
}

/// The OWNER column: a Hermes owner by its kind (`hermes chat`, `gateway: telegram, chat
/// 1234`, `app backend (desktop)`), any other by its process's name. A chat id too long
/// for the column (a webhook's) is left to the session row and the details.
fn owner_of(l: &LeaseRow) -> String {
    use crate::lease::owners::kind::OwnerKind;
    const CHAT_SHOWN: usize = 16;
    let kind =
        l.owner_move.as_ref().map(|m| &m.kind).filter(|k| !matches!(k, OwnerKind::Other | OwnerKind::Leasectl { .. }));
    match (kind, &l.owner) {
        (Some(k @ OwnerKind::Gateway { chat: Some(chat), .. }), Some(_)) if chat.chars().count() > CHAT_SHOWN => {
            k.process().describe()
        }
        (Some(kind), Some(_)) => kind.describe(),
        _ => crate::lease::owners::owner::owner_label(
            l.liveness.name(),
            l.liveness.clock_step_suspected(),
            l.owner.as_ref().map(|o| o.name.as_str()),
        ),
    }
}

/// `text` cut or padded to exactly `width` columns, one space kept before the next column.
fn fit(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n < width {
        format!("{text}{}", " ".repeat(width - n))
    } else if width >= 2 {
        format!("{}… ", text.chars().take(width - 2).collect::<String>())
    } else {
        " ".repeat(width)
    }
}

fn lease_line(app: &App, p: &Palette, l: &LeaseRow, host: Option<&str>, cols: &Columns) -> Line<'static> {
    let e = &l.entry;
    let (badge_text, color) = match app.ending.contains(e.lease_id()) {
        true => ("⏻ ENDING".to_owned(), Color::Magenta),
        false => badge(&l.liveness),
    };
    let when = |t: f64| if cols.full_time() { time::full(t, &app.tz) } else { time::clock(t, app.now, &app.tz) };
    let started = e.process_start_time().map(when).unwrap_or_else(|| "-".into());
    let age = e.started_at().map(|t| time::age(app.now - t)).unwrap_or_else(|| "-".into());
    let owner = owner_of(l);
    let live_id = Some(e.live_session_id()).filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into());
    let short: String = if cols.whole_id() { e.lease_id().to_owned() } else { e.lease_id().chars().take(8).collect() };
    let cells = [
        format!("  {}", shown_text(&short)),
        shown_text(e.surface().unwrap_or("-")),
        e.pid().to_string(),
        shown_text(&owner),
        started,
        age,
        shown_text(&live_id),
        shown_text(host.unwrap_or("-")),
    ];
    let mut text = String::new();
    for ((cell, width), _) in cells.iter().zip(cols.widths).zip(cols.shown).filter(|(_, s)| *s) {
        text.push_str(&fit(cell, width));
    }
    let mut spans = vec![Span::raw(text), Span::styled(badge_text, p.bold(color))];
    if l.leak.is_some() {
        spans.push(Span::raw(" "));
        spans.push(Span::styled("LEAK?", p.bold(Color::Yellow).add_modifier(Modifier::REVERSED)));
    }
    // On etcd, liveness is the lease's TTL: how long until it ends without a renewal.
    if let Some(ttl) = l.ttl_left {
        spans.push(Span::raw(if ttl >= 0 { format!("  ttl {ttl}s") } else { "  ttl ?".to_owned() }));
    }
    Line::from(spans)
}

/// A session's last activity, or its end, for people: `active 5m ago`, `ended 3h ago (tui_shutdown)`.
fn activity(now: f64, ctx: ContextRef<'_>) -> String {
    match (ctx.ended_at(), ctx.last_activity()) {
        (Some(end), _) => {
            let why = ctx.end_reason().map(|r| format!(" ({})", shown_text(r))).unwrap_or_default();
            format!("ended {} ago{why}", time::age(now - end))
        }
        (None, Some(t)) => format!("active {} ago", time::age(now - t)),
        (None, None) => "no activity known".into(),
    }
}

fn render_table(app: &App, p: &Palette, frame: &mut Frame, area: Rect) {
    let rows = app.rows();
    let selected = app.selection_in(&rows);
    let mut block = Block::default().borders(Borders::ALL).title(table_title(app));
    let height = block.inner(area).height.saturating_sub(1) as usize;
    let sel_index = rows
        .iter()
        .position(|r| matches!(r, Row::Lease { registry, lease } if Some((*registry, *lease)) == selected))
        .unwrap_or(0);
    // Only the visible window is laid out: a registry may hold thousands of leases.
    let offset = table_offset(&rows, sel_index, height);
    // Rows out of view are said, not silently cut (the frame's foot: how many, which way).
    let (above, below) = (offset, rows.len().saturating_sub(offset + height));
    if above + below > 0 {
        let marks = [(above, "↑", "above"), (below, "↓", "below")];
        let said: Vec<String> =
            marks.iter().filter(|(n, ..)| *n > 0).map(|(n, arrow, side)| format!("{arrow} {n} more {side}")).collect();
        block = block.title_bottom(format!(" {} ", said.join(" · ")));
    }
    let many = app.tab_registries().len() > 1;
    let marked = app.extension.as_ref().and_then(|x| x.marked_lease());
    let cols = Columns::fit(usize::from(block.inner(area).width), widest(app, &rows));
    let mut lines =
        vec![Line::from(Span::styled(header_line(app, &cols), Style::default().add_modifier(Modifier::BOLD)))];
    for (i, row) in rows.iter().enumerate().skip(offset).take(height) {
        lines.push(match row {
            Row::Session { registry, session, count, conflict } => {
                session_line(app, p, *registry, session, *count, *conflict, many)
            }
            Row::Lease { registry, lease } => {
                let row = &app.registries[*registry].leases[*lease];
                let mut line = lease_line(app, p, row, host_of(app, *registry, row), &cols);
                if let Some((id, mark)) = marked
                    && id == row.entry.lease_id()
                {
                    line.spans.push(Span::styled(mark, p.alert()));
                }
                if i == sel_index && selected.is_some() {
                    line.patch_style(Style::default().add_modifier(Modifier::REVERSED))
                } else {
                    line
                }
            }
        });
    }
    if rows.is_empty() {
        lines.push(Line::from(no_rows_text(app)));
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// The table's title: the sort, the filters in force, and STALE when a registry is unreadable.
fn table_title(app: &App) -> String {
    let reversed = if app.sort_reverse { ", reversed" } else { "" };
    let mut title = format!(" leases — sort: {}{reversed} ", app.sort.label());
    if !app.filter.is_empty() {
        title.push_str(&format!("— filter: {} ", app.filter));
    }
    if app.only_not_alive {
        title.push_str("— only not alive ");
    }
    if app.only_leaks {
        title.push_str("— only leak suspects ");
    }
    if app.tab_registries().iter().any(|r| app.registries[*r].error().is_some()) {
        title.push_str("— STALE ");
    }
    title
}

/// The column headers that fit; the sort column marked ▲ as labelled, ▼ reversed.
/// The sort modes of the table's columns as shown in `width` (in header order, the
/// liveness badge last): what the digit keys sort by.
pub fn sort_modes_shown(app: &App, width: u16) -> Vec<super::sort::SortMode> {
    use super::sort::SortMode;
    const BY_COLUMN: [SortMode; 8] = [
        SortMode::Lease,
        SortMode::Surface,
        SortMode::Pid,
        SortMode::Owner,
        SortMode::Started,
        SortMode::Age,
        SortMode::LiveId,
        SortMode::Host,
    ];
    let rows = app.rows();
    let cols = Columns::fit(usize::from(width), widest(app, &rows));
    let mut modes: Vec<SortMode> =
        BY_COLUMN.iter().zip(cols.shown).filter(|(_, shown)| *shown).map(|(m, _)| *m).collect();
    modes.push(SortMode::Liveness);
    modes
}

fn header_line(app: &App, cols: &Columns) -> String {
    let arrow = if app.sort_reverse { " ▼" } else { " ▲" };
    // The sorted column's arrow stays when its name must be cut (SURFACE at 80 columns).
    let head = |i: usize, width: usize| match app.sort.column() {
        Some(c) if c == i => {
            let name = HEADERS[i];
            let room = width.saturating_sub(3);
            if name.chars().count() <= room || room == 0 {
                format!("{name}{arrow}")
            } else {
                format!("{}…{arrow}", name.chars().take(room.saturating_sub(1)).collect::<String>())
            }
        }
        _ => HEADERS[i].to_owned(),
    };
    let mut header = String::new();
    for (i, (w, _)) in cols.widths.iter().zip(cols.shown).enumerate().filter(|(_, (_, s))| *s) {
        header.push_str(&fit(&head(i, *w), *w));
    }
    header.push_str(&head(BADGE, usize::MAX));
    header
}

/// A session's row: its id, registry (on the all tab), lease count, title and last
/// activity from state.db (clipped first on a narrow screen), and a conflict.
fn session_line(
    app: &App,
    p: &Palette,
    registry: usize,
    session: &str,
    count: usize,
    conflict: bool,
    many: bool,
) -> Line<'static> {
    let mut spans = vec![Span::styled(format!("▸ {}", shown_text(session)), p.bold(Color::Cyan))];
    if many {
        spans.push(Span::raw(format!("  [{}]", app.registries[registry].location.label())));
    }
    spans.push(Span::raw(format!("  {}", crate::lease::words::human::plural(count, "lease", "leases"))));
    if let Some(ctx) = app.registries[registry].session(session) {
        if let Some(title) = ctx.title() {
            spans.push(Span::styled(format!("  “{}”", shown_text(title)), p.fg(Color::White)));
        }
        spans.push(Span::styled(format!("  {}", activity(app.now, ctx)), p.fg(Color::DarkGray)));
    }
    if conflict {
        spans.push(Span::raw("  "));
        spans.push(Span::styled("⚠ CONFLICT: more than one live owner", p.alert()));
    }
    Line::from(spans)
}

/// What an empty table says: still reading, cannot read, nothing held, or nothing matches.
fn no_rows_text(app: &App) -> &'static str {
    let loaded = app.tab_registries().iter().all(|r| app.registries[*r].loaded);
    let unknown = app.tab_registries().iter().any(|r| app.registries[*r].unknown());
    if !loaded {
        "  reading…"
    } else if unknown {
        "  leases unknown: the registry cannot be read (see above)"
    } else if app.filter.is_empty() && !app.only_not_alive && !app.only_leaks {
        "  no leases held"
    } else {
        "  no lease matches the filter"
    }
}

fn render_details(app: &App, p: &Palette, frame: &mut Frame, area: Rect) {
    let block = Block::default().borders(Borders::ALL).title(" details ");
    let Some(l) = app.selected_lease() else {
        frame.render_widget(Paragraph::new("no lease selected").block(block), area);
        return;
    };
    let mut lines = vec![Line::from(vec![
        Span::styled("liveness: ", Style::default().add_modifier(Modifier::BOLD)),
        Span::styled(l.liveness.explain(), p.fg(badge(&l.liveness).1)),
    ])];
    // Who the owner is comes first: what an operator asks before anything else.
    lines.extend(owner_lines(app, l));
    if let Some(why) = &l.leak {
        lines.push(Line::from(vec![Span::styled("LEAK?: ", p.bold(Color::Yellow)), Span::raw(shown_text(why))]));
    }
    for (k, v) in &l.entry.fields() {
        let shown = match (k.as_str(), v.as_f64()) {
            ("started_at" | "updated_at" | "process_start_time", Some(t)) => {
                format!("{}  ({})", pyjson::to_string(v), time::full(t, &app.tz))
            }
            _ => pyjson::to_string(v),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{}: ", shown_text(k)), Style::default().add_modifier(Modifier::BOLD)),
            Span::raw(shown_text(&shown)),
        ]));
    }
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let registry = app.selection().map(|(r, _)| &app.registries[r]);
    match (registry.and_then(|r| r.session(l.entry.session_id())), registry.and_then(|r| r.sessions.as_deref())) {
        (Some(ctx), _) => {
            lines.push(Line::from(Span::styled("session (state.db)", bold)));
            let when = |t: Option<f64>| t.map(|t| time::full(t, &app.tz)).unwrap_or_else(|| "-".into());
            lines.push(Line::from(format!("  title: {}", shown_text(ctx.title().unwrap_or("-")))));
            lines.push(Line::from(format!(
                "  source: {}  messages: {}",
                shown_text(ctx.source().unwrap_or("-")),
                ctx.messages()
            )));
            lines.push(Line::from(format!("  started: {}", when(ctx.started_at()))));
            if ctx.ended_at().is_some() {
                let why = ctx.end_reason().map(shown_text).unwrap_or_else(|| "-".into());
                lines.push(Line::from(format!("  ended: {} ({why})", when(ctx.ended_at()))));
            }
            lines.push(Line::from(format!(
                "  last activity: {}  ({})",
                when(ctx.last_activity()),
                activity(app.now, ctx)
            )));
        }
        (None, Some(Contexts::Unknown(why))) => {
            lines.push(Line::from(format!("session context unknown: {}", shown_text(why))));
        }
        (None, Some(Contexts::Read(_))) => lines.push(Line::from("session: not in state.db")),
        (None, None) => {}
    }
    render_scrolled(frame, area, block, lines, app.details_scroll, "] and [");
}

/// The safe move for `l`'s lease, as the CLI words it (its commands plain: the console's
/// own keys are x and S).
pub(super) fn safe_move_text(l: &LeaseRow, m: &crate::lease::owners::kind::OwnerMove) -> String {
    let cmd = |args: &[&str]| {
        format!(
            "`leasectl {}`",
            args.iter().map(|a| crate::lease::words::human::shell_word(a)).collect::<Vec<_>>().join(" ")
        )
    };
    crate::lease::words::safe_move::advise_move(m, l.entry.lease_id(), l.pid_here(), &cmd)
}

/// The details' owner block: pid, name, user and command line, or where the owner is.
fn owner_lines(app: &App, l: &super::event::LeaseRow) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let bold = Style::default().add_modifier(Modifier::BOLD);
    match &l.owner {
        Some(o) => {
            lines.push(Line::from(Span::styled("owner process", bold)));
            let user = o.user.as_deref().unwrap_or("-");
            // An owner in a container: the pid it recorded, and the one this host knows.
            let pid = match l.liveness.namespaced() {
                Some(ns) => format!("{} ({} on this host, in {})", l.entry.pid(), ns.host_pid, shown_text(&ns.place())),
                None => l.entry.pid().to_string(),
            };
            lines.push(Line::from(format!("  pid: {pid}  name: {}  user: {}", shown_text(&o.name), shown_text(user))));
            lines.push(Line::from(format!("  cmd: {}", shown_text(&o.cmdline.join(" ")))));
            lines.push(Line::from(format!(
                "  cpu: {:.1}%  rss: {:.1} MiB",
                o.cpu_percent,
                o.rss_bytes as f64 / (1024.0 * 1024.0)
            )));
            if let Some(m) = &l.owner_move {
                lines.push(Line::from(format!(
                    "  kind: {}  holds {}",
                    shown_text(&m.kind.describe()),
                    crate::lease::words::human::plural(m.situation.sessions_held, "session", "sessions")
                )));
                lines.push(Line::from(format!("  safe move: {}", shown_text(&safe_move_text(l, m)))));
            }
        }
        // On etcd an owner on another host is not a process here: say where it is.
        None if l.host.as_deref().is_some_and(|h| h != app.host) => {
            lines.push(Line::from(Span::styled("owner process", bold)));
            let host = shown_text(l.host.as_deref().unwrap_or("-"));
            lines.push(Line::from(format!("  on host {host}, pid {} (not looked at from here)", l.entry.pid())));
            let ttl = match l.ttl_left {
                Some(t) if t >= 0 => format!("{t}s left when last read"),
                _ => "not known".into(),
            };
            lines.push(Line::from(format!("  etcd lease TTL: {ttl}")));
        }
        None if l.liveness.name() == "hidden" => {
            lines.push(Line::from(format!("owner process: pid {}, hidden from this user by /proc", l.entry.pid())))
        }
        None => lines.push(Line::from(format!("owner process: pid {} not running", l.entry.pid()))),
    }
    lines
}

/// `lines` in a framed `area`, wrapped and scrolled down `scroll` lines (within what
/// there is); the frame's foot says what is out of view and which keys scroll it.
fn render_scrolled(frame: &mut Frame, area: Rect, block: Block, lines: Vec<Line>, scroll: usize, keys: &str) {
    let inner_width = usize::from(area.width.saturating_sub(2).max(1));
    let total: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner_width)).sum();
    let height = usize::from(area.height.saturating_sub(2));
    let scroll = scroll.min(total.saturating_sub(height));
    let below = total.saturating_sub(scroll + height);
    let mut block = block;
    if scroll + below > 0 {
        let mut said = Vec::new();
        if scroll > 0 {
            said.push(format!("↑ {scroll} more above"));
        }
        if below > 0 {
            said.push(format!("↓ {below} more below ({keys})"));
        }
        block = block.title_bottom(format!(" {} ", said.join(" · ")));
    }
    let paragraph = Paragraph::new(lines).block(block).wrap(Wrap { trim: false });
    frame.render_widget(paragraph.scroll((scroll.min(usize::from(u16::MAX)) as u16, 0)), area);
}

fn render_log(app: &App, p: &Palette, frame: &mut Frame, area: Rect) {
    let total = app.log.len();
    let height = usize::from(area.height.saturating_sub(2));
    // Scrolled to the top, the window still shows a full page.
    let end = total.saturating_sub(app.log_scroll).max(height.min(total));
    let block = if app.log_focus {
        let title = format!(" events (focused: ↑↓ PgUp PgDn Home End; e/Esc back) — up to {end} of {total} ");
        Block::default().borders(Borders::ALL).title(title).border_style(p.bold(Color::Cyan))
    } else {
        Block::default().borders(Borders::ALL).title(" events ")
    };
    let lines: Vec<Line> = app
        .log
        .iter()
        .take(end)
        .skip(end.saturating_sub(height))
        .map(|l| {
            let style = match l.level {
                LogLevel::Info => Style::default(),
                LogLevel::Change => p.fg(Color::Cyan),
                LogLevel::Warn => p.bold(Color::Yellow),
            };
            Line::from(vec![
                Span::raw(format!("{} {:<6} ", time::clock(l.at, app.now, &app.tz), shown_text(&l.profile))),
                Span::styled(shown_text(&l.text), style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn render_footer(app: &App, p: &Palette, frame: &mut Frame, area: Rect) {
    use super::state::Mode;
    let line = match (app.mode(), &app.filter_input, &app.tab_input) {
        // Selected (typing replaces it): shown reversed, as a selection is.
        (Mode::Filter, Some(input), _) if app.filter_selected => Line::from(vec![
            Span::styled("filter: ", p.bold(Color::Cyan)),
            Span::styled(shown_text(input), Style::default().add_modifier(Modifier::REVERSED)),
            Span::raw(format!("▏   {}", filter_hint())),
        ]),
        (Mode::Filter, Some(input), _) => Line::from(vec![
            Span::styled("filter: ", p.bold(Color::Cyan)),
            Span::raw(format!("{}▏", shown_text(input))),
            Span::raw(format!("   {}", filter_hint())),
        ]),
        (Mode::TabName, _, Some(tab)) => {
            let (typed, found) = (tab.typed.as_str(), tab.found);
            let none = if found { "" } else { "  (no tab has that in its name)" };
            Line::from(vec![
                Span::styled("go to tab: ", p.bold(Color::Cyan)),
                Span::raw(format!("{}▏{none}", shown_text(typed))),
                Span::raw(format!("   {}", super::keys::line_hint(Some("stay")))),
            ])
        }
        _ => {
            let console: Vec<KeyRow> = CONSOLE_KEYS.iter().map(Binding::row).collect();
            let extension = app.extension.as_ref().map(|x| x.keys()).unwrap_or_default();
            let entries: Vec<String> =
                footer_entries(&console, &extension).iter().map(|(k, w)| format!("{k} {w}")).collect();
            Line::from(Span::styled(entries.join("  "), p.fg(Color::DarkGray)))
        }
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// The home a file location lives in (the header of a multi-registry tab).
fn home_of(location: &Location) -> String {
    match location.registry() {
        Some(r) => r.home.display().to_string(),
        None => location.describe(),
    }
}
