//! Root working in another user's home (an operator's `sudo leasectl prune`): what it
//! creates there goes to that home's owner, and what it rewrites keeps its owner, so
//! the user's own Hermes and leasectl go on working afterwards.

use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, chown, fchown};
use std::path::{Path, PathBuf};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `create_dir_all`, with every directory it creates given, when running as root, to
/// the owner of the nearest directory that already existed.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let existing: Option<PathBuf> = dir.ancestors().find(|a| a.is_dir()).map(Path::to_path_buf);
    std::fs::create_dir_all(dir)?;
    if let Some(base) = existing.filter(|_| is_root()) {
        let meta = std::fs::metadata(&base)?;
        let mut created: Vec<&Path> = dir.ancestors().take_while(|a| *a != base).collect();
        created.reverse();
        for d in created {
            chown(d, Some(meta.uid()), Some(meta.gid()))?;
        }
    }
    Ok(())
}

/// Give a file root just created to `owner` (uid, gid); nothing when not root.
pub fn give(file: &File, owner: (u32, u32)) -> io::Result<()> {
    if is_root() && owner != (0, 0) { fchown(file, Some(owner.0), Some(owner.1)) } else { Ok(()) }
}

/// The (uid, gid) of `path`.
pub fn owner_of(path: &Path) -> io::Result<(u32, u32)> {
    std::fs::metadata(path).map(|m| (m.uid(), m.gid()))
}
