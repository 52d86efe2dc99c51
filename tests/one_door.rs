//! All of leasectl's file access in a home goes through `lease::home::safe_file` (issue 21):
//! no other source file opens, creates, renames or removes a file, except what reads
//! `/proc` and the few places marked `// one door:` with the reason (SQLite opening a
//! vetted state.db, the demo creating its own sandbox).

use std::fs;
use std::path::Path;

const OPENERS: [&str; 17] = [
    "File::open",
    "File::create",
    "OpenOptions",
    "fs::write",
    "fs::read(",
    "fs::read_to_string",
    "fs::read_dir",
    "fs::rename",
    "fs::remove_",
    "fs::copy",
    "fs::hard_link",
    "create_dir",
    "Connection::open",
    "rustix::fs::open",
    "openat",
    "fs::symlink(",
    "fs::set_permissions(",
];

#[test]
fn only_the_safe_file_module_opens_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = crate::common::rust_sources(&root.join("src"));
    assert!(files.len() > 20, "found the sources");
    let mut found = Vec::new();
    for f in files {
        if f.ends_with("src/lease/home/safe_file.rs") {
            continue;
        }
        let text = fs::read_to_string(&f).expect("read");
        // Unit tests make their own fixtures.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let lines: Vec<&str> = code.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if t.starts_with("//") || !OPENERS.iter().any(|o| line.contains(o)) || line.contains("/proc") {
                continue;
            }
            let marked = lines[i.saturating_sub(2)..=i].iter().any(|l| l.contains("// one door:"));
            if !marked {
                found.push(format!("{}:{}: {}", f.strip_prefix(root).unwrap_or(&f).display(), i + 1, t));
            }
        }
    }
    assert!(
        found.is_empty(),
        "files opened outside lease::home::safe_file (use it, or mark why not):\n{}",
        found.join("\n")
    );
}
