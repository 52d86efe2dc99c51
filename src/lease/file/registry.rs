//! Reading and writing the registry file (spec §3): strict read, and an atomic,
//! Hermes-identical write (temp file, fsync, rename; old file kept on any error).

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;

use rustix::fs::FileType;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use super::format::{
    HEAD, MAX_PROBLEMS, Parsed, ParsedInto, RegistryFile, parse, parse_owned, parse_owned_into, serialize,
    serialize_into, serialize_to,
};
use super::recent;
use crate::lease::error::{Error, InvalidRegistry};
use crate::lease::format::entry::Entry;
use crate::lease::format::problem::{Problem, Rule};
use crate::lease::home::lock::RegistryLock;
use crate::lease::home::paths::{TEMP_PREFIX, TEMP_SUFFIX};
use crate::lease::home::safe_file::{self, Spot};

/// Larger files are refused unread, so a hostile registry cannot exhaust memory.
pub const MAX_REGISTRY_BYTES: u64 = 64 * 1024 * 1024;

/// Read strictly. A missing file is an empty registry; anything invalid is an error
/// naming the rule and the entry.
pub fn read(path: &Path) -> Result<RegistryFile, Error> {
    let mut bytes = Vec::new();
    if !read_into(path, &mut bytes)? {
        return Ok(RegistryFile::default());
    }
    let parsed = match recent::lookup(path, &bytes) {
        Some(recent::Found::Same(file)) => Ok(file),
        Some(recent::Found::Reparsed(file)) => {
            // Text as reparsed (its changed part checked; the rest is the text remembered).
            match String::from_utf8(bytes) {
                Ok(text) => recent::remember(path, Arc::new(text), &file, true),
                Err(_) => recent::forget(path),
            }
            Ok(file)
        }
        None => {
            let parsed = parse_owned(bytes);
            match (&parsed.result, parsed.text) {
                (Ok(file), Ok(text)) => recent::remember(path, text, file, parsed.hermes_layout),
                _ => recent::forget(path),
            }
            parsed.result
        }
    };
    parsed.map_err(|problems| Error::Invalid(InvalidRegistry { path: path.to_path_buf(), problems }))
}

/// [`read`] for a reader that wants each entry only as what `each` makes of it, as it is
/// read (see [`super::format::parse_owned_into`]); nothing is remembered.
pub fn read_each<T>(path: &Path, each: &mut impl FnMut(Entry) -> T) -> Result<Vec<T>, Error> {
    let mut bytes = Vec::new();
    if !read_into(path, &mut bytes)? {
        return Ok(Vec::new());
    }
    parse_owned_into(bytes, each)
        .result
        .map(|(items, _)| items)
        .map_err(|problems| Error::Invalid(InvalidRegistry { path: path.to_path_buf(), problems }))
}

/// The file's bytes, or None when it does not exist. Too-large files are refused.
pub fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let mut bytes = Vec::new();
    Ok(read_into(path, &mut bytes)?.then_some(bytes))
}

/// Read the registry into `bytes` (cleared first); false when it does not exist.
fn read_into(path: &Path, bytes: &mut Vec<u8>) -> Result<bool, Error> {
    bytes.clear();
    // Through the one door: a symlink (as the registry or as runtime/), a FIFO or a
    // device is refused unopened; the lock we may hold is never held up by it.
    let mut file = match safe_file::open_read(&Spot::in_subdir(path)) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(false),
        Err(e) if safe_file::is_refusal(&e) => return Err(Error::Invalid(unreadable(path, e.to_string()))),
        Err(e) => {
            return Err(Error::Invalid(cannot_read(path, format!("cannot open: {e}"))));
        }
    };
    let size = match file.metadata() {
        Ok(m) => m.len(),
        Err(e) => return Err(Error::Invalid(cannot_read(path, format!("cannot inspect: {e}")))),
    };
    // Sized up front (bounded by the limit): no regrowing copies of a large registry.
    bytes.reserve(size.min(MAX_REGISTRY_BYTES) as usize + 1);
    let limit = MAX_REGISTRY_BYTES + 1;
    if let Err(e) = (&mut file).take(limit).read_to_end(bytes) {
        return Err(Error::Invalid(cannot_read(path, format!("cannot read: {e}"))));
    }
    if bytes.len() as u64 > MAX_REGISTRY_BYTES {
        return Err(Error::Invalid(unreadable(
            path,
            format!("larger than the {} MiB limit", MAX_REGISTRY_BYTES / (1024 * 1024)),
        )));
    }
    Ok(true)
}

fn cannot_read(path: &Path, detail: String) -> InvalidRegistry {
    InvalidRegistry {
        path: path.to_path_buf(),
        problems: vec![Problem { rule: Rule::CannotRead, entry_index: None, lease_id: None, detail }],
    }
}

fn unreadable(path: &Path, detail: String) -> InvalidRegistry {
    InvalidRegistry {
        path: path.to_path_buf(),
        problems: vec![Problem { rule: Rule::Unreadable, entry_index: None, lease_id: None, detail }],
    }
}

/// Replace the registry atomically. The lock guard proves the caller holds the lock.
pub fn write(_lock: &RegistryLock, path: &Path, file: &RegistryFile) -> Result<(), Error> {
    if !recent::enabled() {
        return write_streamed(path, file);
    }
    let mut text = String::new();
    serialize_into(file, &mut text);
    let written = write_bytes(path, text.as_bytes());
    match &written {
        Ok(()) => recent::remember(path, Arc::new(text), file, true),
        Err(_) => recent::forget(path),
    }
    written
}

/// What a streamed write gathers before each write(2).
const STREAM_BUFFER: usize = 256 * 1024;

/// [`write`] streamed to the temp file, for a process that remembers nothing: the text
/// is never whole in memory (2 MB at 10,000 entries, fresh pages in a one-shot process).
fn write_streamed(path: &Path, file: &RegistryFile) -> Result<(), Error> {
    write_with(path, |tmp| {
        let mut out = std::io::BufWriter::with_capacity(STREAM_BUFFER, tmp);
        let mut failed = None;
        serialize_to(file, &mut |piece| {
            if failed.is_none() {
                failed = out.write_all(piece.as_bytes()).err();
            }
        });
        failed.map_or_else(|| out.flush(), Err)
    })
}

/// Replace the registry with exact bytes (the demo's corrupt/repair, a restored
/// backup), with the same atomic write as [`write`].
pub fn write_raw(_lock: &RegistryLock, path: &Path, bytes: &[u8]) -> Result<(), Error> {
    recent::forget(path);
    write_bytes(path, bytes)
}

/// Temp file in the same directory, the registry's mode kept (a new one gets
/// `0666 & ~umask`; the temp file is never wider than that), write, fsync, rename.
/// On any error the temp file is removed and the old registry is untouched. Only
/// `runtime/` is created, inside an existing home; root writes as the directory's owner.
fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_with(path, |tmp| tmp.write_all(bytes))
}

/// [`write_bytes`], the temp file filled by `fill`.
fn write_with(path: &Path, fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) -> Result<(), Error> {
    let spot = Spot::in_subdir(path);
    let (dir_spot, name) = spot.dir_and_name().map_err(|e| Error::io("write", path, e))?;
    let dir = safe_file::Dir::create(&dir_spot).map_err(|e| {
        if safe_file::is_refusal(&e) {
            Error::Refused(format!("{e}: refusing to write the registry"))
        } else {
            Error::io("create the runtime directory", &dir_spot.path(), e)
        }
    })?;
    check_owner(&dir)?;
    let existing_mode = match dir.stat(name) {
        Ok(Some(st)) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            return Err(Error::Refused(format!(
                "{} is a symlink: refusing to write through it or replace it (make it a regular file)",
                path.display()
            )));
        }
        Ok(Some(st)) => Some(st.st_mode & 0o7777),
        Ok(None) => None,
        Err(e) => return Err(Error::io("inspect the registry", path, e)),
    };
    let (tmp_name, mut tmp) = dir
        .create_temp(TEMP_PREFIX, TEMP_SUFFIX, existing_mode.unwrap_or(0o666) & 0o666)
        .map_err(|e| Error::io("create a temp file in", dir.path(), e))?;
    let tmp_path = dir.path().join(&tmp_name);
    let result = (|| {
        if let Some(mode) = existing_mode {
            // The umask may have narrowed the temp file: give it exactly the registry's mode.
            tmp.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(|e| Error::io("set the mode of", &tmp_path, e))?;
        }
        failpoint("before-temp-write");
        fill(&mut tmp).map_err(|e| Error::io("write", &tmp_path, e))?;
        failpoint("after-temp-write");
        tmp.sync_all().map_err(|e| Error::io("fsync", &tmp_path, e))?;
        failpoint("before-rename");
        dir.rename(&tmp_name, name).map_err(|e| Error::io("rename the temp file over", path, e))?;
        failpoint("after-rename");
        Ok(())
    })();
    if result.is_err() {
        let _ = dir.remove(&tmp_name);
    }
    result
}

/// Refuse to write into a runtime directory owned by another user (unless root):
/// their registry is theirs to change.
fn check_owner(dir: &safe_file::Dir) -> Result<(), Error> {
    let me = rustix::process::geteuid().as_raw();
    let (uid, _) = dir.owner();
    if me != 0 && uid != me {
        return Err(Error::Refused(format!(
            "{} belongs to uid {uid}, and leasectl runs as uid {me}: refusing to write another user's registry",
            dir.path().display(),
        )));
    }
    Ok(())
}

/// A crash point for tests (feature `failpoints`): when `LEASECTL_TEST_FAILPOINT` names
/// this step, the process kills itself there (SIGKILL), so tests can prove a crash at
/// any step of the write leaves either the old or the new registry.
fn failpoint(step: &str) {
    if crate::lease::failpoint::chosen(step) {
        let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Leftover Hermes/leasectl temp files in a runtime directory (a crashed writer's):
/// every release's names (see [`temp_file_writer`]).
pub fn leftover_temp_files(runtime_dir: &Path) -> Vec<PathBuf> {
    let names = match safe_file::Dir::open(&Spot::in_home(runtime_dir)) {
        Ok(Some(dir)) => dir.names().unwrap_or_default(),
        _ => vec![],
    };
    let mut out: Vec<PathBuf> = names
        .into_iter()
        .filter(|n| temp_file_writer(&n.to_string_lossy()).is_some())
        .map(|n| runtime_dir.join(n))
        .collect();
    out.sort();
    out
}

/// Who writes a registry temp file of this name: Hermes 0.21 and later and leasectl
/// (`.active_sessions_XXXXXXXX.tmp`), or Hermes 0.19
/// (`active_sessions.json.<pid>.<32 hex>.tmp`, under the same lock).
pub fn temp_file_writer(name: &str) -> Option<&'static str> {
    if name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX) {
        return Some("Hermes 0.21+ or leasectl");
    }
    let middle = name.strip_prefix("active_sessions.json.")?.strip_suffix(TEMP_SUFFIX)?;
    let (pid, hex) = middle.split_once('.')?;
    let is_pid = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    let is_uuid = hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (is_pid && is_uuid).then_some("Hermes 0.19")
}

#[cfg(test)]
mod tests {
    use super::super::format::tests::SAMPLE;
    use super::*;

    #[test]
    fn every_releases_temp_files_are_named_with_their_writer() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(temp_file_writer(".active_sessions_k2j3h4.tmp"), Some("Hermes 0.21+ or leasectl"));
        assert_eq!(temp_file_writer(&format!("active_sessions.json.4242.{hex}.tmp")), Some("Hermes 0.19"));
        for other in [
            "active_sessions.json",
            "active_sessions.lock",
            &format!("active_sessions.json.42x.{hex}.tmp"),
            &format!("active_sessions.json.4242.{}.tmp", &hex[1..]),
            "active_sessions.json.4242.0123456789ABCDEF0123456789ABCDEF.tmp",
            ".leasectl-abc.tmp",
        ] {
            assert_eq!(temp_file_writer(other), None, "{other}");
        }
    }

    #[test]
    fn remembered_registries_never_hide_a_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("active_sessions.json");
        let lock =
            crate::lease::home::lock::lock(&dir.path().join("lock"), std::time::Duration::from_secs(5)).expect("lock");
        let file = parse(SAMPLE.as_bytes()).expect("valid");
        write(&lock, &path, &file).expect("write");
        assert_eq!(read(&path).expect("read back"), file);
        // Another writer changes one byte (same length): the change is seen.
        let other = SAMPLE.replace("\"S\"", "\"T\"");
        std::fs::write(&path, &other).expect("external write");
        assert_eq!(read(&path).expect("changed").entries[0].session_id(), "T");
        // Broken bytes are an error, never the remembered registry.
        std::fs::write(&path, &SAMPLE[..SAMPLE.len() - 1]).expect("external write");
        assert!(read(&path).is_err());
        // And the first bytes again read as the first registry.
        std::fs::write(&path, SAMPLE).expect("external write");
        assert_eq!(read(&path).expect("restored"), file);
        // A raw write is not mistaken for the last structured one.
        write_raw(&lock, &path, other.as_bytes()).expect("raw write");
        assert_eq!(read(&path).expect("raw").entries[0].session_id(), "T");
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(read(&path).expect("missing"), RegistryFile::default());
    }

    #[test]
    fn a_streamed_write_is_byte_for_byte_the_whole_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("active_sessions.json");
        // Unknown top-level keys before and after the entries, and more entries than one
        // buffer holds.
        let entry = |i: usize| {
            SAMPLE["{\"entries\": [".len()..SAMPLE.len() - 2].replace("0123456789abcdef", &format!("{i:016x}"))
        };
        let entries: Vec<String> = (0..2_000).map(entry).collect();
        let text = format!("{{\"aa\": [1, 2.5], \"entries\": [{}], \"zz\": {{\"k\": null}}}}", entries.join(", "));
        assert!(text.len() > STREAM_BUFFER);
        let file = parse(text.as_bytes()).expect("valid");
        write_streamed(&path, &file).expect("streamed");
        assert_eq!(std::fs::read_to_string(&path).expect("written"), serialize(&file));
        assert_eq!(serialize(&file), text);
        let empty = RegistryFile::default();
        write_streamed(&path, &empty).expect("streamed");
        assert_eq!(std::fs::read_to_string(&path).expect("written"), "{\"entries\": []}");
    }

    #[test]
    fn every_registry_a_thread_reads_is_remembered_however_many() {
        // A console reads the root and every profile in turn: with 12 of them, the
        // first is still remembered when its turn comes again (it was once 4 slots).
        let dir = tempfile::tempdir().expect("tempdir");
        let paths: Vec<PathBuf> = (0..12).map(|i| dir.path().join(format!("r{i}.json"))).collect();
        for p in &paths {
            std::fs::write(p, SAMPLE).expect("write");
            read(p).expect("valid");
        }
        assert_eq!(recent::remembered_count(), 12);
        assert!(matches!(recent::lookup(&paths[0], SAMPLE.as_bytes()), Some(recent::Found::Same(_))));
    }
}
