//! `ls`: which leases to show (filters, order), what to mark (conflicts, an over-full
//! cap), and the formats (table, wide, json, tsv).

use std::collections::HashMap;

use super::args::{Format, LivenessArg, LsArgs, SortKey};
use super::marks::Marks;
use super::output::{self, LEASE_HEADER, table_lines};
use super::{EXIT_ERROR, EXIT_OK, Failure, note_stdout};
use crate::lease::home::context::ContextRef;
use crate::lease::owners::owner::OwnerInfo;
use crate::lease::owners_of_listing;
use crate::lease::words::human::{duration, escape, plural};
use crate::lease::{self, LeaseStore, LeaseView, Liveness, Location, now};

/// True when the filters select this lease.
pub(super) fn selected(v: &LeaseView, a: &LsArgs) -> bool {
    (a.session.is_empty() || a.session.iter().any(|s| s == v.entry.session_id()))
        && (a.surface.is_empty() || a.surface.iter().any(|s| Some(s.as_str()) == v.entry.surface()))
        && (a.liveness.is_empty() || a.liveness.contains(&state_of(&v.liveness)))
}

/// Keep only the leases the filters select, in the order asked for.
fn select(views: &mut Vec<LeaseView>, a: &LsArgs) {
    views.retain(|v| selected(v, a));
    let Some(key) = a.sort else { return };
    // Stable: ties keep the stored order.
    match key {
        SortKey::Session => views.sort_by(|x, y| x.entry.session_id().cmp(y.entry.session_id())),
        SortKey::Age => views.sort_by(|x, y| {
            let at = |v: &LeaseView| v.entry.started_at().unwrap_or(f64::INFINITY);
            at(x).total_cmp(&at(y))
        }),
        SortKey::Pid => views.sort_by_key(|v| v.entry.pid()),
        SortKey::Surface => views.sort_by(|x, y| x.entry.surface().cmp(&y.entry.surface())),
        SortKey::Liveness => views.sort_by_key(|v| state_of(&v.liveness) as u8),
    }
}

pub(super) fn state_of(l: &Liveness) -> LivenessArg {
    match l {
        Liveness::Alive | Liveness::AliveInNamespace(_) => LivenessArg::Alive,
        Liveness::Dead(_) => LivenessArg::Dead,
        Liveness::Recycled { .. } => LivenessArg::Recycled,
        Liveness::Unknown(_) => LivenessArg::Unknown,
        Liveness::WorkRunning { .. } => LivenessArg::WorkRunning,
    }
}

pub(super) fn ls(
    mut stores: Vec<Box<dyn LeaseStore>>,
    a: &LsArgs,
    idle: Option<std::time::Duration>,
    discover: super::watch::Discover,
    hints: &super::hints::Hints,
) -> Result<i32, Failure> {
    if a.watch {
        let selected = |v: &LeaseView| selected(v, a);
        let follow = super::watch::Follow {
            format: a.format.format(),
            no_headers: a.format.no_headers,
            present: true,
            selected: &selected,
            record: false,
            metrics_file: None,
            metrics_every: std::time::Duration::MAX,
            discover,
            idle,
        };
        return super::watch::follow(&mut stores, &follow);
    }
    let mut listings: Vec<lease::Listing> = stores.iter_mut().map(|s| s.read()).collect();
    // A store keeps its last read (every entry) for a console's next look; this listing
    // has its own, and frees that copy before owners are looked up and printed.
    drop(stores);
    // Per registry: pids on other hosts are other processes than the same pids here.
    let owners: Vec<HashMap<u64, OwnerInfo>> = listings.iter().map(owners_of_listing).collect();
    let mut marks: Vec<Marks> = listings.iter().map(|l| marks_of(l, idle)).collect();
    // How many sessions each owner holds, over every registry listed (a pid on another
    // host is another process: counted only with its own registry's), and the home's
    // other registries where an owner of many sessions is listed.
    let local = |l: &&lease::Listing| l.location.registry().is_some();
    let mut held = crate::lease::owners::kind::Holdings::of(
        listings.iter().filter(local).flat_map(|l| l.leases.as_deref().unwrap_or_default()),
    );
    add_unlisted(&mut held, &listings);
    for (l, m) in listings.iter().zip(&mut marks) {
        if local(&l) {
            m.holdings = held.clone();
        }
    }
    for l in &mut listings {
        if let Ok(views) = &mut l.leases {
            select(views, a);
        }
    }
    let format = a.format.format();
    if let [listing] = listings.as_slice()
        && let Location::Etcd(at) = &listing.location
    {
        let views = listing.leases.as_ref().map_err(|e| Failure::from(e.clone()))?;
        let remote = listing.remote.clone().unwrap_or_default();
        match format {
            Format::Tsv => tsv(&[(&listing.location, views.as_slice(), &marks[0], &owners[0])], a.format.no_headers),
            _ => output::etcd_listing(at, views, &remote, &owners[0], format),
        }
        return Ok(EXIT_OK);
    }
    let any_error = listings.iter().any(|s| s.leases.is_err());
    match format {
        Format::Json => print_json_streamed(&listings, &owners, &marks),
        Format::Tsv => {
            let rows: Vec<Rows> = listings
                .iter()
                .zip(&marks)
                .zip(&owners)
                .filter_map(|((l, m), o)| Some((&l.location, l.leases.as_deref().ok()?, m, o)))
                .collect();
            tsv(&rows, a.format.no_headers);
            for l in &listings {
                if let Err(e) = &l.leases {
                    say_err!(
                        "leasectl: {} ({}): {}",
                        l.location.label(),
                        l.location.describe(),
                        beside(&l.location, e)
                    );
                }
            }
        }
        Format::Table | Format::Wide => {
            let how = Tables { wide: format == Format::Wide, bare: a.format.no_headers, hints };
            tables(&listings, &marks, &owners, &how)
        }
    }
    Ok(if any_error { EXIT_ERROR } else { EXIT_OK })
}

/// Count into `held` the leases of the home's registries not in `listings`, where a live
/// owner listed may hold more there: a gateway or an app backend (a process that may
/// serve several profiles). A home without one reads nothing more.
fn add_unlisted(held: &mut crate::lease::owners::kind::Holdings, listings: &[lease::Listing]) {
    use crate::lease::owners::kind::OwnerKind;
    let views = || listings.iter().filter_map(|l| l.leases.as_deref().ok()).flatten();
    let many = views().any(|v| {
        crate::lease::view::owner_may_be_alive(v)
            && matches!(OwnerKind::of(&v.entry, None), OwnerKind::Gateway { .. } | OwnerKind::AppBackend { .. })
    });
    let Some(reg) = listings.iter().find_map(|l| l.location.registry()).filter(|_| many) else { return };
    let listed: Vec<std::path::PathBuf> =
        listings.iter().filter_map(|l| l.location.registry()).map(|r| r.path()).collect();
    let root = crate::lease::home::paths::root_of(&reg.home);
    for other in crate::lease::home::paths::all_registries(&root) {
        if listed.contains(&other.path()) {
            continue;
        }
        if let Ok(views) = crate::lease::file::snapshot(&other).leases {
            held.add(&views);
        }
    }
}

/// What stands out in one listing, judged on every lease before filters hide any, with
/// state.db's word on each live session.
fn marks_of(l: &lease::Listing, idle: Option<std::time::Duration>) -> Marks {
    let Ok(views) = &l.leases else { return Marks::default() };
    let mut m = Marks::of(views, l.cap.cap);
    if let Some(reg) = l.location.registry() {
        m.add_context(&reg.home, views, idle);
    } else if let Some((contexts, threshold)) = crate::lease::remote_sessions(&l.location) {
        m.judge_context(contexts, idle.unwrap_or(threshold), views);
    }
    m
}

/// `ls --json`, streamed one lease's JSON at a time: a tree of 50,000 leases would take
/// 40 times the registry's size in memory. The bytes are those of the tree, pretty-printed.
fn print_json_streamed(listings: &[lease::Listing], owners: &[HashMap<u64, OwnerInfo>], marks: &[Marks]) {
    super::print_json_streamed(&super::json::LsJson { listings, owners, marks });
}

/// How the tables are printed: wide, bare (--no-headers), and the hints an error's text
/// names commands with.
struct Tables<'a> {
    wide: bool,
    bare: bool,
    hints: &'a super::hints::Hints,
}

fn tables(listings: &[lease::Listing], marks: &[Marks], owners: &[HashMap<u64, OwnerInfo>], how: &Tables) {
    let Tables { wide, bare, hints } = *how;
    for (i, ((s, m), owners)) in listings.iter().zip(marks).zip(owners).enumerate() {
        // --no-headers: the lease rows only (for awk and cut); what is wrong goes to stderr.
        if i > 0 && !bare {
            say!();
        }
        // A host that did not answer said nothing of its cap.
        let unanswered =
            matches!(s.leases, Err(crate::lease::Error::Unreachable { .. } | crate::lease::Error::Connecting { .. }));
        let cap = match s.cap.cap {
            Some(c) => format!("cap {c}"),
            None if unanswered => "cap unknown".into(),
            None => "no cap".into(),
        };
        let name = s.location.label();
        let (name, place) = (name.as_str(), s.location.describe());
        match &s.leases {
            Err(e) if bare => say_err!("leasectl: {name}  {place}: ERROR: {}", hints.apply(&beside(&s.location, e))),
            Err(e) => say!("{name}  {place}  {cap}\n  ERROR: {}", hints.apply(&beside(&s.location, e))),
            Ok(views) => {
                if !bare {
                    say!("{}", registry_line(name, &place, &cap, views.len(), s.cap.cap, m));
                }
                if !views.is_empty() {
                    // Over --host: the host first, on every row (so rows from several hosts
                    // piped together still say where each lease is).
                    let host = s.location.host().map(|h| h.name.as_str());
                    let at = now();
                    let row = |i: usize| {
                        let Some(v) = views.get(i) else { return vec![] };
                        let mut cells = if wide {
                            wide_row(v, owners, m, at)
                        } else {
                            let mut cells = output::lease_row(v, owners, at);
                            if let Some(liveness) = cells.get_mut(5) {
                                mark_liveness(liveness, &m.of_lease(v));
                            }
                            cells
                        };
                        if let Some(host) = host {
                            cells.insert(0, host.to_owned());
                        }
                        cells
                    };
                    let header: &[&str] = if wide { &WIDE_HEADER } else { &LEASE_HEADER };
                    let with_host: Vec<&str>;
                    let header = match host {
                        Some(_) => {
                            with_host = std::iter::once("HOST").chain(header.iter().copied()).collect();
                            &with_host
                        }
                        None => header,
                    };
                    // Line by line, each row made as it is printed: 50,000 leases are never
                    // held as a table of text.
                    for line in table_lines(header, views.len(), row).skip(usize::from(bare)) {
                        say!("{}", if bare { line.strip_prefix("  ").unwrap_or(&line) } else { &line });
                    }
                }
            }
        }
        // The wide table's TITLE and ACTIVE come from state.db: blank ones say why (as
        // doctor does), unless there is simply no state.db.
        let unknown = match &m.context {
            Some(crate::lease::home::context::Contexts::Unknown(why)) if wide && why != "no state.db" => Some(why),
            _ => None,
        };
        let warnings = s.cap.warnings.iter().map(|w| format!("warning: {w}"));
        // Why an owner is `hidden`, once per registry: not dead, only out of this user's sight.
        let hidden: Vec<&lease::LeaseView> =
            s.leases.as_deref().unwrap_or_default().iter().filter(|v| v.liveness.name() == "hidden").collect();
        let hidden = hidden.first().map(|v| {
            let what = crate::lease::words::human::plural(hidden.len(), "owner is", "owners are");
            let explained = v.liveness.explain();
            let why = explained.strip_prefix("hidden: ").unwrap_or(&explained).to_owned();
            format!("{what} hidden, kept and counted toward the cap: {why}")
        });
        let unknown = unknown.map(|why| format!("session context unknown: {why}"));
        // A registry left where no profile is: listed while it holds leases, and why.
        let standing = s.location.registry().filter(|r| !r.standing.is_live()).map(|r| {
            format!("not a live profile: {}; listed while its registry holds leases", r.standing.explain(&r.profile))
        });
        for w in warnings.chain(standing).chain(hidden).chain(unknown) {
            if bare {
                say_err!("leasectl: {name}: {w}");
            } else {
                say!("  {w}");
            }
        }
    }
}

/// An error under a line that names its registry: a registry file's path is said there
/// already (a host's description does not name the file).
fn beside(location: &Location, e: &lease::Error) -> String {
    if location.registry().is_some() { e.beside_path() } else { e.to_string() }
}

/// A registry's line above its table: where it is, its cap, how full, what is wrong.
fn registry_line(name: &str, place: &str, cap: &str, leases: usize, limit: Option<u64>, m: &Marks) -> String {
    let slots = limit.map(|c| format!("{}/{c} slots", m.live)).unwrap_or(format!("{} live", m.live));
    let over = if m.over_cap { "  OVER CAP" } else { "" };
    let conflicts = match m.conflicts.len() {
        0 => String::new(),
        n => format!("  {}", plural(n, "CONFLICT", "CONFLICTS")),
    };
    // Filtered: how many of how many are shown, beside slots that count them all.
    let leases = match m.total {
        total if total != leases => format!("{leases} of {} shown", plural(total, "lease", "leases")),
        _ => plural(leases, "lease", "leases"),
    };
    format!("{name}  {place}  {cap}  {leases}, {slots}{over}{conflicts}")
}

fn mark_liveness(cell: &mut String, marks: &[&str]) {
    for m in marks {
        cell.push(' ');
        cell.push_str(m);
    }
}

const WIDE_HEADER: [&str; 15] = [
    "LEASE", "SESSION", "SURFACE", "PID", "OWNER", "KIND", "HOLDS", "USER", "RSS", "LIVENESS", "AGE", "LIVE ID",
    "TITLE", "ACTIVE", "COMMAND",
];

/// A session's last activity for people: `5m ago`, `ended 3h ago`, or `-` (no context).
pub(super) fn activity_text(ctx: Option<ContextRef<'_>>) -> String {
    let at = now();
    match ctx {
        Some(c) if c.ended_at().is_some() => format!("ended {} ago", duration(at - c.ended_at().unwrap_or(at))),
        Some(c) => c.last_activity().map(|t| format!("{} ago", duration(at - t))).unwrap_or_else(|| "-".into()),
        None => "-".into(),
    }
}

/// One lease's row under [`WIDE_HEADER`], its age as of `at`.
fn wide_row(v: &LeaseView, owners: &HashMap<u64, OwnerInfo>, m: &Marks, at: f64) -> Vec<String> {
    let mut short = output::lease_row(v, owners, at).into_iter();
    let mut next = || short.next().unwrap_or_default();
    let (_, session, surface, pid, owner, mut liveness, age, live_id) =
        (next(), next(), next(), next(), next(), next(), next(), next());
    let o = v.owner_pid_here().and_then(|p| owners.get(&p));
    if let Some(ns) = v.liveness.namespaced() {
        liveness.push_str(&format!(", in {}", ns.place()));
    }
    mark_liveness(&mut liveness, &m.of_lease(v));
    let kind = m.owner_move(v, o);
    vec![
        v.entry.lease_id().to_owned(),
        session,
        surface,
        pid,
        owner,
        kind.kind.describe(),
        kind.situation.sessions_held.to_string(),
        o.and_then(|o| o.user.clone()).unwrap_or_else(|| "-".into()),
        o.map(|o| format!("{:.1}M", o.rss_bytes as f64 / (1024.0 * 1024.0))).unwrap_or_else(|| "-".into()),
        liveness,
        age,
        live_id,
        m.context_of(v).and_then(|c| c.title()).unwrap_or("-").to_owned(),
        activity_text(m.context_of(v)),
        o.map(|o| o.cmdline.join(" ")).filter(|c| !c.is_empty()).unwrap_or_else(|| "-".into()),
    ]
}

const TSV_HEADER: [&str; 12] = [
    "PROFILE",
    "LEASE",
    "SESSION",
    "SURFACE",
    "PID",
    "OWNER",
    "LIVENESS",
    "AGE_SECS",
    "LIVE_ID",
    "MARKS",
    "TITLE",
    "IDLE_SECS",
];

/// On etcd, after the columns every backend has (a script reading by position keeps working).
const ETCD_TSV_COLUMNS: [&str; 3] = ["HOST", "TTL_SECS", "FENCING_TOKEN"];

/// One line per lease, fields joined by tabs; text from files escaped, so a tab or a
/// newline inside a field can never split it. On etcd, the owner's host, the TTL left
/// and the fencing token follow.
/// One registry's rows: its name, leases, marks and owners.
type Rows<'a> = (&'a Location, &'a [LeaseView], &'a Marks, &'a HashMap<u64, OwnerInfo>);

fn tsv(registries: &[Rows], bare: bool) {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut written = Ok(());
    let etcd = registries.iter().any(|(_, views, _, _)| views.iter().any(|v| v.remote.is_some()));
    // Over --host: the host first, on every line.
    let hosts = registries.iter().any(|(l, ..)| l.host().is_some());
    if !bare {
        let mut header: Vec<&str> = TSV_HEADER.to_vec();
        if hosts {
            header.insert(0, "HOST");
        }
        if etcd {
            header.extend(ETCD_TSV_COLUMNS);
        }
        written = writeln!(out, "{}", header.join("\t"));
    }
    let here = crate::lease::owners::owner::hostname();
    let at = now();
    for (location, views, marks, owners) in registries {
        let profile = location.name();
        for v in *views {
            let e = &v.entry;
            // A line has no registry line above it: the registry's OVER_CAP goes on each
            // live lease's (a script filters lines, not tables).
            let mut m = marks.of_lease(v);
            if marks.over_cap && v.liveness.counts_as_live() {
                let after_conflict = usize::from(m.first() == Some(&"CONFLICT"));
                m.insert(after_conflict, "OVER CAP");
            }
            // A pid on another host is no process here.
            let local = v.remote.as_ref().is_none_or(|r| r.host == here);
            let mut fields = vec![
                escape(profile).into_owned(),
                escape(e.lease_id()).into_owned(),
                escape(e.session_id()).into_owned(),
                escape(e.surface().unwrap_or("-")).into_owned(),
                e.pid().to_string(),
                escape(&crate::lease::owners::owner::owner_label(
                    v.liveness.name(),
                    v.liveness.clock_step_suspected(),
                    v.owner_pid_here().and_then(|p| owners.get(&p)).filter(|_| local).map(|o| o.name.as_str()),
                ))
                .into_owned(),
                v.liveness.name().to_owned(),
                e.started_at().map(|t| format!("{:.0}", (at - t).max(0.0))).unwrap_or_else(|| "-".into()),
                Some(e.live_session_id())
                    .filter(|s| !s.is_empty())
                    .map(|s| escape(&s).into_owned())
                    .unwrap_or("-".into()),
                if m.is_empty() { "-".into() } else { m.join(",").replace(' ', "_") },
                marks.context_of(v).and_then(|c| c.title()).map(|t| escape(t).into_owned()).unwrap_or("-".into()),
                marks
                    .context_of(v)
                    .and_then(|c| c.last_activity())
                    .map(|t| format!("{:.0}", (at - t).max(0.0)))
                    .unwrap_or_else(|| "-".into()),
            ];
            if hosts {
                fields.insert(0, location.host().map_or("-".into(), |h| escape(&h.name).into_owned()));
            }
            if etcd {
                let r = v.remote.as_ref();
                fields.push(r.map(|r| escape(&r.host).into_owned()).unwrap_or_else(|| "-".into()));
                fields.push(r.and_then(|r| r.ttl_left).map(|t| t.to_string()).unwrap_or_else(|| "-".into()));
                fields.push(r.map(|r| r.fencing_token.to_string()).unwrap_or_else(|| "-".into()));
            }
            if written.is_ok() {
                written = writeln!(out, "{}", fields.join("\t"));
            }
        }
    }
    note_stdout(written.and_then(|()| out.flush()));
}
