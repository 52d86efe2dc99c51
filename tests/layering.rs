//! The core's layering, read from the sources: the store interface is the only way to a
//! backend. Nothing outside `src/lease/` names a host's ssh session (`ssh::link`), and no
//! file the backends share (the root of `src/lease/` but `mod.rs`, and `home/`,
//! `owners/`, `format/`, `words/`, `address/`, `doctor/`) names a backend (`file::`, `etcd::`, `ssh::`): `lease/mod.rs`
//! is the one place that opens one and reaches other hosts. The demo uses the console
//! through its extension point only. The etcd feature is named where the core opens a
//! backend and where the options are defined, nowhere else.

use std::fs;
use std::path::Path;

/// Lines of code (comments left out) of `path` that contain any of `names`.
fn naming(path: &Path, names: &[&str]) -> Vec<String> {
    let text = fs::read_to_string(path).expect("read");
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| names.iter().any(|n| l.contains(n)))
        .map(|(i, l)| format!("{}:{}: {}", path.display(), i + 1, l.trim()))
        .collect()
}

#[test]
fn only_the_core_reaches_a_hosts_ssh_session() {
    let files = crate::common::rust_sources(Path::new("src"));
    let found: Vec<String> = files
        .iter()
        .filter(|p| !p.starts_with("src/lease"))
        .flat_map(|p| naming(p, &["ssh::link", "ssh::store"]))
        .collect();
    assert!(
        found.is_empty(),
        "outside the core, a host is reached through lease:: functions only:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_shared_core_file_names_a_backend() {
    let mut files = Vec::new();
    for shared in [
        "src/lease/home",
        "src/lease/owners",
        "src/lease/format",
        "src/lease/words",
        "src/lease/address",
        "src/lease/doctor",
    ] {
        files.extend(crate::common::rust_sources(Path::new(shared)));
    }
    files.extend(
        fs::read_dir("src/lease")
            .expect("src/lease")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs") && p.file_name().is_some_and(|n| n != "mod.rs")),
    );
    assert!(files.len() > 20, "found the shared files: {files:?}");
    let backends = ["lease::file::", "lease::etcd::", "lease::ssh::", "super::file::", "super::etcd::", "super::ssh::"];
    let found: Vec<String> = files.iter().flat_map(|p| naming(p, &backends)).collect();
    assert!(found.is_empty(), "a shared core file names a backend:\n{}", found.join("\n"));
}

/// `lease/mod.rs` picks a backend for a location ([`open`], [`watch`]) and re-exports only the
/// shared vocabulary: a backend's own functions are named by their backend (`lease::file::acquire`).
#[test]
fn the_core_facade_reexports_no_backend() {
    let text = fs::read_to_string("src/lease/mod.rs").expect("src/lease/mod.rs");
    let found: Vec<&str> = text
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("pub use") && ["file::", "etcd::", "ssh::"].iter().any(|b| l.contains(b))
        })
        .collect();
    assert!(found.is_empty(), "lease/mod.rs re-exports a backend's items:\n{}", found.join("\n"));
}

/// The demo plugs into the console through its extension point alone (`tui::extension`,
/// which gives what an extension speaks): the console's other modules are not the demo's
/// to use. Its unit tests may look at the console's key table, to check it is not shadowed.
#[test]
fn the_demo_uses_the_consoles_extension_point_only() {
    let files = crate::common::rust_sources(Path::new("src/demo"));
    let found: Vec<String> = files
        .iter()
        .flat_map(|p| {
            let text = fs::read_to_string(p).expect("read");
            let code = text.split("#[cfg(test)]").next().unwrap_or("").to_owned();
            code.lines()
                .enumerate()
                .filter(|(_, l)| l.contains("crate::tui::") && !l.contains("crate::tui::extension"))
                .map(|(i, l)| format!("{}:{}: {}", p.display(), i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(found.is_empty(), "the demo reaches past the extension point:\n{}", found.join("\n"));
}

#[test]
fn the_etcd_feature_is_named_where_the_core_opens_a_backend_and_where_options_are_defined() {
    let files = crate::common::rust_sources(Path::new("src"));
    let allowed = |p: &Path| p == Path::new("src/lease/mod.rs") || p == Path::new("src/cli/args.rs");
    let found: Vec<String> = files
        .iter()
        .filter(|p| !p.starts_with("src/lease/etcd") && !allowed(p))
        .flat_map(|p| naming(p, &["feature = \"etcd\""]))
        .collect();
    assert!(found.is_empty(), "the etcd feature named outside lease/mod.rs and cli/args.rs:\n{}", found.join("\n"));
    assert!(!naming(Path::new("src/lease/mod.rs"), &["feature = \"etcd\""]).is_empty(), "the test reads the sources");
}

/// The core's root holds the store interface and a few shared types; the rest lives in
/// folders named for what they are.
#[test]
fn the_cores_root_holds_at_most_twelve_files() {
    let files: Vec<String> = fs::read_dir("src/lease")
        .expect("src/lease")
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.contains(&"mod.rs".to_owned()), "read src/lease: {files:?}");
    assert!(files.len() <= 12, "{} files at the root of src/lease: {files:?}", files.len());
}

/// The core imports nothing above it: no command line, console, demo, supervisor or server.
#[test]
fn the_core_imports_nothing_above_it() {
    let files = crate::common::rust_sources(Path::new("src/lease"));
    assert!(files.len() > 50, "read src/lease: {}", files.len());
    let above = ["crate::cli", "crate::tui", "crate::demo", "crate::supervise", "crate::serve"];
    let found: Vec<String> = files.iter().flat_map(|p| naming(p, &above)).collect();
    assert!(found.is_empty(), "the core names what is above it:\n{}", found.join("\n"));
}

/// The console's update and drawing read state only: no file, process, store or
/// terminal I/O in the files that change or render it (the worker does the I/O and
/// sends what it found as events). Its own pid is not I/O.
#[test]
fn the_consoles_update_and_drawing_do_no_io() {
    let drawing = [
        "src/tui/update.rs",
        "src/tui/state.rs",
        "src/tui/keys.rs",
        "src/tui/view.rs",
        "src/tui/dialog_view.rs",
        "src/tui/style.rs",
        "src/tui/layout.rs",
        "src/tui/columns.rs",
        "src/demo/view.rs",
    ];
    let io = [
        "std::fs",
        "std::process",
        "std::net",
        "std::io::",
        "safe_file",
        "lease::open",
        "LeaseStore",
        "Command::new",
        "sysinfo",
        "rusqlite",
    ];
    let found: Vec<String> = drawing
        .iter()
        .flat_map(|p| naming(Path::new(p), &io))
        .filter(|line| !line.contains("std::process::id()"))
        .collect();
    assert!(found.is_empty(), "update or drawing does I/O:\n{}", found.join("\n"));
}
