//! The one door to a home's files. A home belongs to its user, and root may be the one
//! acting in it (`sudo leasectl prune`): every file leasectl opens there is reached
//! from the home's directory one component at a time without following a symlink,
//! must be a regular file (or a directory) before it is used, and anything root
//! creates, renames or removes there is done with the directory owner's identity
//! (fsuid/fsgid/groups of this thread), so the kernel refuses what that user could not
//! do. Nothing else in leasectl opens files in a home (tests/one_door.rs checks).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// A place in a home: the home's directory (as the operator named it; followed) and a
/// path beneath it (never followed through a symlink).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spot {
    pub home: PathBuf,
    pub rel: PathBuf,
}

impl Spot {
    pub(crate) fn new(home: impl Into<PathBuf>, rel: impl Into<PathBuf>) -> Spot {
        Spot { home: home.into(), rel: rel.into() }
    }

    /// `<home>/<dir>/<name>` given whole (the registry, its lock, the audit file): the
    /// home is the grandparent.
    pub(crate) fn in_subdir(path: &Path) -> Spot {
        Self::beneath(path, 2)
    }

    /// `<home>/<name>` given whole (`config.yaml`, `state.db`): the home is the parent.
    pub(crate) fn in_home(path: &Path) -> Spot {
        Self::beneath(path, 1)
    }

    fn beneath(path: &Path, depth: usize) -> Spot {
        let mut home = path.to_path_buf();
        let mut names = Vec::new();
        for _ in 0..depth {
            match (home.file_name().map(OsStr::to_owned), home.parent()) {
                (Some(n), Some(p)) => {
                    names.push(n);
                    home = p.to_path_buf();
                }
                _ => break,
            }
        }
        if home.as_os_str().is_empty() {
            home = PathBuf::from(".");
        }
        Spot { home, rel: names.iter().rev().collect() }
    }

    /// The whole path, for messages.
    pub(crate) fn path(&self) -> PathBuf {
        self.home.join(&self.rel)
    }

    /// The spot's directory and its file name.
    pub(crate) fn dir_and_name(&self) -> io::Result<(Spot, &OsStr)> {
        let name = self.rel.file_name().ok_or_else(|| refusal(&self.path(), "names no file"))?;
        let dir = self.rel.parent().unwrap_or(Path::new(""));
        Ok((Spot::new(&self.home, dir), name))
    }
}

/// What a path turned out to be, in words for a warning.
pub(crate) fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        _ => "not a regular file",
    }
}

/// An error that names the path and what is wrong with it.
fn refusal(path: &Path, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{} {what}: refused", path.display()))
}

/// True for an error this module made because a path was not what it must be (a
/// symlink, a FIFO, too large...), as opposed to the system failing.
pub(crate) fn is_refusal(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::InvalidInput
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

thread_local! {
    /// Whether this thread keeps the home it last opened (see [`keep_the_home_open`]).
    static KEEP_THE_HOME: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// That home.
    static LAST_HOME: std::cell::RefCell<Option<KeptHome>> = const { std::cell::RefCell::new(None) };
}

/// A directory's owner: (uid, gid).
type Owner = (u32, u32);

/// The home a thread keeps: its path as named, its directory as opened and checked then,
/// and whom the directory belongs to.
struct KeptHome {
    path: PathBuf,
    fd: Arc<OwnedFd>,
    owner: Owner,
}

/// From now on this thread opens a home once while it opens no other in between: a
/// command that ends once done keeps the directory it checked, and every later file of
/// that home is reached from it. Root's opening walks the home's path for planted links,
/// twice (11 system calls for a home three directories deep), and an `acquire` opened its
/// home five times. Not for a
/// process that runs on (the console, `hold`, `run`): a home made again while it runs is
/// a new directory to it. One home is kept, so `--all-profiles` holds no descriptor per
/// profile.
pub(crate) fn keep_the_home_open() {
    KEEP_THE_HOME.with(|keep| keep.set(true));
}

/// Open the home's own directory ([`open_home_now`]), or give the one this thread kept:
/// the same descriptor, shared (no copy of it to make and close), with its owner as
/// looked up when it was opened. The owner is None for a home opened anew.
fn open_home(home: &Path) -> io::Result<(Arc<OwnedFd>, Option<Owner>)> {
    if !KEEP_THE_HOME.with(std::cell::Cell::get) {
        return Ok((Arc::new(open_home_now(home)?), None));
    }
    let kept = LAST_HOME.with_borrow(|last| match last {
        Some(kept) if kept.path == home => Some((Arc::clone(&kept.fd), Some(kept.owner))),
        _ => None,
    });
    if let Some(kept) = kept {
        return Ok(kept);
    }
    let fd = Arc::new(open_home_now(home)?);
    let owner = owner_of(&fd)?;
    LAST_HOME.with_borrow_mut(|last| *last = Some(KeptHome { path: home.to_path_buf(), fd: Arc::clone(&fd), owner }));
    Ok((fd, Some(owner)))
}

/// Open the home's own directory. The operator's path is followed, but when root acts,
/// a symlink on it owned by another user must point to a directory of that same user
/// (else `~/.hermes -> /root` would make root act in its own directory for mallory).
fn open_home_now(home: &Path) -> io::Result<OwnedFd> {
    let root = is_root();
    if root {
        check_symlinks_on(home)?;
    }
    let fd = rustix::fs::open(home, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    if root {
        // The path could have been swapped between the check and the open: check it again,
        // and that it still names the directory that was opened.
        check_symlinks_on(home)?;
        let (named, opened) = (rustix::fs::stat(home)?, rustix::fs::fstat(&fd)?);
        if (named.st_dev, named.st_ino) != (opened.st_dev, opened.st_ino) {
            return Err(refusal(home, "changed while it was being opened"));
        }
    }
    Ok(fd)
}

fn check_symlinks_on(home: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut prefix = PathBuf::new();
    for c in home.components() {
        prefix.push(c);
        let Ok(link) = std::fs::symlink_metadata(&prefix) else { continue };
        if !link.file_type().is_symlink() || link.uid() == 0 {
            continue;
        }
        if let Ok(target) = std::fs::metadata(&prefix)
            && target.uid() != link.uid()
        {
            return Err(refusal(
                &prefix,
                &format!(
                    "is a symlink owned by uid {} to a directory owned by uid {}: root does not act there",
                    link.uid(),
                    target.uid()
                ),
            ));
        }
    }
    Ok(())
}

/// The plain names of a relative path; `..`, `.` and absolute parts are refused.
fn names(spot: &Spot) -> io::Result<Vec<&OsStr>> {
    spot.rel
        .components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(refusal(&spot.path(), "is not a plain path beneath the home")),
        })
        .collect()
}

/// Step into directory `name` of `dir` without following a symlink.
fn step(dir: impl AsFd, name: &OsStr, shown: &Path) -> io::Result<OwnedFd> {
    let dir = dir.as_fd();
    check_kind(dir, name, shown, FileType::Directory)?;
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(fd)
}

/// Refuse `name` in `dir` unless it is absent or of kind `want` (never following it).
fn check_kind(dir: impl AsFd, name: &OsStr, shown: &Path, want: FileType) -> io::Result<()> {
    let dir = dir.as_fd();
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => {
            let t = FileType::from_raw_mode(st.st_mode);
            if t == want {
                return Ok(());
            }
            if t == FileType::Symlink {
                let to = rustix::fs::readlinkat(dir, name, Vec::new())
                    .map(|t| format!(" to {}", t.to_string_lossy()))
                    .unwrap_or_default();
                return Err(refusal(shown, &format!("is a symlink{to} (never followed)")));
            }
            Err(refusal(shown, &format!("is {}, not {}", kind_name(t), kind_name(want))))
        }
        Err(e) => Err(e.into()),
    }
}

/// A directory in a home, reached safely, and whom it belongs to.
#[derive(Debug)]
pub(crate) struct Dir {
    /// Shared with this thread's kept home when it is that home.
    fd: Arc<OwnedFd>,
    path: PathBuf,
    owner: Owner,
}

impl Dir {
    /// The directory at `spot` (the home itself for an empty `rel`); None when it (or
    /// the home) does not exist.
    pub(crate) fn open(spot: &Spot) -> io::Result<Option<Dir>> {
        Self::reach(spot, false)
    }

    /// The directory at `spot`, its last component created (as the owner of the
    /// directory above it) when missing. Nothing above that is created: the home and
    /// every directory between must exist.
    pub(crate) fn create(spot: &Spot) -> io::Result<Dir> {
        match Self::reach(spot, true)? {
            Some(d) => Ok(d),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} does not exist (leasectl creates nothing above {})",
                    spot.home.display(),
                    spot.rel.display()
                ),
            )),
        }
    }

    fn reach(spot: &Spot, create_last: bool) -> io::Result<Option<Dir>> {
        let names = names(spot)?;
        // `owner`: whom `fd` belongs to, when already known.
        let (mut fd, mut owner) = match open_home(&spot.home) {
            Ok(opened) => opened,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut shown = spot.home.clone();
        for (i, name) in names.iter().enumerate() {
            shown.push(name);
            (fd, owner) = match step(&fd, name, &shown) {
                Ok(next) => (Arc::new(next), None),
                Err(e) if e.kind() == io::ErrorKind::NotFound && create_last && i + 1 == names.len() => {
                    let owner = owner_known_or_of(owner, &fd)?;
                    let parent = Dir { owner, fd, path: shown.parent().unwrap_or(&shown).into() };
                    let made = parent.make_dir(name)?;
                    (made.fd, Some(made.owner))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
        }
        let owner = owner_known_or_of(owner, &fd)?;
        Ok(Some(Dir { fd, path: shown, owner }))
    }

    /// The home at `home`, created when missing with every missing directory above it,
    /// as Hermes' acquire does (`mkdir(parents=True, exist_ok=True)`). Each one is made
    /// as the owner of the directory it is made in, so root making a home inside a
    /// user's directory makes it that user's. A `..` in the missing part, or a symlink
    /// planted where a directory is being made, is refused.
    pub(crate) fn create_home(home: &Path) -> io::Result<Dir> {
        let mut missing = Vec::new();
        let mut at = home.to_path_buf();
        let (fd, owner) = loop {
            match open_home(&at) {
                Ok(opened) => break opened,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let Some(name) = at.file_name() else {
                        return Err(refusal(
                            home,
                            "cannot be created: a '..' or the root is in the part that is missing",
                        ));
                    };
                    missing.push(name.to_owned());
                    at = match at.parent() {
                        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                        Some(_) => PathBuf::from("."),
                        None => return Err(e),
                    };
                }
                Err(e) => return Err(e),
            }
        };
        let owner = owner_known_or_of(owner, &fd)?;
        let mut dir = Dir { owner, fd, path: at };
        for name in missing.iter().rev() {
            dir = dir.make_dir(name)?;
        }
        Ok(dir)
    }

    /// The directory `name` in this one, made (mode 0777 less the umask, as the owner of
    /// this directory) when missing; whatever else is there is refused, never followed.
    fn make_dir(&self, name: &OsStr) -> io::Result<Dir> {
        let shown = self.shown(name);
        {
            let _as = ActAs::owner_of(self);
            match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let fd = step(&self.fd, name, &shown)?;
        Ok(Dir { owner: owner_of(&fd)?, fd: Arc::new(fd), path: shown })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Where the directory that was opened is now, with no symlink in it (what the kernel
    /// says of the open descriptor): for a library that opens by path (SQLite), which can
    /// then refuse any symlink on the way (a path swapped after this is refused, not
    /// followed).
    pub(crate) fn resolved_path(&self) -> io::Result<PathBuf> {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// (uid, gid) of the directory.
    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }

    fn shown(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// What `name` is (never following it), or None when absent.
    pub(crate) fn kind(&self, name: impl AsRef<OsStr>) -> io::Result<Option<FileType>> {
        Ok(self.stat(name)?.map(|st| FileType::from_raw_mode(st.st_mode)))
    }

    /// What `name` is, its size and mode (never following it); None when absent.
    pub(crate) fn stat(&self, name: impl AsRef<OsStr>) -> io::Result<Option<rustix::fs::Stat>> {
        let name = name.as_ref();
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Open an existing regular file for reading; None when absent. A symlink, FIFO,
    /// device or directory there is refused, naming the path, and never opened.
    pub(crate) fn open_read(&self, name: impl AsRef<OsStr>) -> io::Result<Option<File>> {
        let name = name.as_ref();
        match self.open_regular(name, OFlags::RDONLY, None) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            other => other.map(Some),
        }
    }

    /// Open `name` to append, created (mode `mode`, as the directory's owner) when missing.
    pub(crate) fn open_append(&self, name: impl AsRef<OsStr>, mode: u32) -> io::Result<File> {
        let name = name.as_ref();
        match self.open_regular(name, OFlags::WRONLY | OFlags::APPEND, None) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => return other,
        }
        match self.create_new(name, mode, OFlags::APPEND) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                self.open_regular(name, OFlags::WRONLY | OFlags::APPEND, None)
            }
            other => other,
        }
    }

    /// Create `name` exclusively (O_EXCL: whatever is planted there is never followed)
    /// as the directory's owner, for writing.
    pub(crate) fn create_new(&self, name: impl AsRef<OsStr>, mode: u32, extra: OFlags) -> io::Result<File> {
        let name = name.as_ref();
        let _as = ActAs::owner_of(self);
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC | extra,
            Mode::from_raw_mode(mode),
        )?;
        Ok(File::from(fd))
    }

    /// A new temp file `<prefix><random><suffix>` (O_EXCL, as the owner), and its name.
    pub(crate) fn create_temp(&self, prefix: &str, suffix: &str, mode: u32) -> io::Result<(String, File)> {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789_";
        let mut last = None;
        for _ in 0..100 {
            let random = crate::lease::address::ids::random_u64().map_err(io::Error::from)?;
            let name: String = random.to_le_bytes().iter().map(|b| CHARS[*b as usize % CHARS.len()] as char).collect();
            let name = format!("{prefix}{name}{suffix}");
            match self.create_new(&name, mode, OFlags::empty()) {
                Ok(f) => return Ok((name, f)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free temp name")))
    }

    fn open_regular(&self, name: &OsStr, flags: OFlags, mode: Option<u32>) -> io::Result<File> {
        let shown = self.shown(name);
        check_kind(&self.fd, name, &shown, FileType::RegularFile)?;
        // NONBLOCK: a FIFO swapped in after the check must not hang the open.
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode.unwrap_or(0)),
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP => refusal(&shown, "is a symlink (never followed)"),
            rustix::io::Errno::NXIO => refusal(&shown, "is a FIFO, not a regular file"),
            e => e.into(),
        })?;
        let t = FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode);
        if t != FileType::RegularFile {
            return Err(refusal(&shown, &format!("is {}, not a regular file", kind_name(t))));
        }
        Ok(File::from(fd))
    }

    /// If `name` is a FIFO, open it for writing without waiting and close it again (as
    /// the directory's owner): a reader blocked opening it is let go, and reads nothing.
    /// Anything else there is left alone, never opened.
    pub(crate) fn wake_fifo(&self, name: impl AsRef<OsStr>) {
        let name = name.as_ref();
        if !matches!(self.kind(name), Ok(Some(FileType::Fifo))) {
            return;
        }
        let _as = ActAs::owner_of(self);
        let _ = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        );
    }

    /// Rename `from` to `to` in this directory, as its owner (names, never followed).
    pub(crate) fn rename(&self, from: impl AsRef<OsStr>, to: impl AsRef<OsStr>) -> io::Result<()> {
        let _as = ActAs::owner_of(self);
        rustix::fs::renameat(&self.fd, from.as_ref(), &self.fd, to.as_ref())?;
        Ok(())
    }

    /// Remove the name `name` (a symlink goes, not its target), as the owner.
    pub(crate) fn remove(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let _as = ActAs::owner_of(self);
        rustix::fs::unlinkat(&self.fd, name.as_ref(), AtFlags::empty())?;
        Ok(())
    }

    /// The names in the directory (not `.`/`..`), unsorted.
    pub(crate) fn names(&self) -> io::Result<Vec<std::ffi::OsString>> {
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(&self.fd)? {
            let entry = entry?;
            let n = entry.file_name().to_bytes();
            if n != b"." && n != b".." {
                out.push(OsStr::from_bytes(n).to_owned());
            }
        }
        Ok(out)
    }

    /// Append `line` and a newline: the whole line or nothing. On a short write (disk
    /// full) the file is cut back to where it was, so the next line is not glued to half
    /// of this one.
    /// A file with another hard link, or of another owner than the directory's, is
    /// refused: where `fs.protected_hardlinks` is 0, a link planted here to any file
    /// would get the line (root's JSON appended to /etc/shadow, say).
    pub(crate) fn append_line(&self, name: impl AsRef<OsStr>, line: &[u8], mode: u32) -> io::Result<()> {
        let mut f = self.open_append(name.as_ref(), mode)?;
        let st = rustix::fs::fstat(&f)?;
        let shown = self.shown(name.as_ref());
        if st.st_nlink > 1 {
            return Err(refusal(
                &shown,
                &format!("has {} hard links (another name for it would get the line): not appended to", st.st_nlink),
            ));
        }
        if st.st_uid != self.owner.0 {
            return Err(refusal(
                &shown,
                &format!(
                    "belongs to uid {}, not to uid {} who owns {}: not appended to",
                    st.st_uid,
                    self.owner.0,
                    self.path.display()
                ),
            ));
        }
        append_whole(&mut f, line)
    }
}

/// Append `line` + `\n` to `f` (opened O_APPEND) in one write, or cut it back.
pub(crate) fn append_whole(f: &mut File, line: &[u8]) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line);
    bytes.push(b'\n');
    let before = f.metadata()?.len();
    let mut done = 0usize;
    while done < bytes.len() {
        match f.write(&bytes[done..]) {
            Ok(0) => return Err(cut_back(f, before, done, io::Error::from(io::ErrorKind::WriteZero))),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(cut_back(f, before, done, e)),
        }
    }
    Ok(())
}

fn cut_back(f: &File, before: u64, written: usize, e: io::Error) -> io::Error {
    // Only when the file ends with our partial line: another writer's line is never cut.
    if written > 0 && f.metadata().is_ok_and(|m| m.len() == before + written as u64) {
        let _ = f.set_len(before);
        return io::Error::new(e.kind(), format!("{e} (the partial line was removed)"));
    }
    e
}

/// `known` when it is, else the owner of `fd` looked up.
fn owner_known_or_of(known: Option<Owner>, fd: impl AsFd) -> io::Result<Owner> {
    known.map_or_else(|| owner_of(fd), Ok)
}

fn owner_of(fd: impl AsFd) -> io::Result<Owner> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_uid, st.st_gid))
}

/// This thread acting with a user's file-system identity (fsuid, fsgid, groups) while
/// root works in that user's directory; restored when dropped. Nothing when not root,
/// or when the directory is root's.
pub(crate) struct ActAs {
    groups: Vec<rustix::process::Gid>,
}

impl ActAs {
    pub(crate) fn owner_of(dir: &Dir) -> Option<ActAs> {
        Self::user(dir.owner)
    }

    #[allow(unsafe_code)] // the system call below has no safe wrapper; see SAFETY
    pub(crate) fn user((uid, gid): (u32, u32)) -> Option<ActAs> {
        if uid == 0 || !is_root() {
            return None;
        }
        let groups = rustix::process::getgroups().unwrap_or_default();
        // Per thread (the raw system calls, not glibc's process-wide setgroups): the
        // console's other threads keep root's identity. The user's own supplementary
        // groups are not looked up: their primary group is enough to write their home.
        let _ = rustix::thread::set_thread_groups(&[rustix::process::Gid::from_raw(gid)]);
        // SAFETY: setfsgid/setfsuid only change this thread's file-system ids.
        unsafe {
            libc::setfsgid(gid);
            libc::setfsuid(uid);
        }
        Some(ActAs { groups })
    }
}

impl Drop for ActAs {
    #[allow(unsafe_code)] // the system call below has no safe wrapper; see SAFETY
    fn drop(&mut self) {
        // SAFETY: as above; back to root's ids (the capabilities return with fsuid 0).
        unsafe {
            libc::setfsuid(0);
            libc::setfsgid(0);
        }
        let _ = rustix::thread::set_thread_groups(&self.groups);
    }
}

/// Replace the file at `spot` whole: a new temp file beside it (O_EXCL, as the
/// directory's owner), written, fsynced, renamed over it. The directory must exist.
pub(crate) fn replace(spot: &Spot, bytes: &[u8], mode: u32) -> io::Result<()> {
    let (dir_spot, name) = spot.dir_and_name()?;
    let dir = Dir::create(&dir_spot)?;
    if let Some(t) = dir.kind(name)?.filter(|t| *t != FileType::RegularFile) {
        return Err(refusal(&spot.path(), &format!("is {}, not a regular file", kind_name(t))));
    }
    let (tmp, mut f) = dir.create_temp(".leasectl-", ".tmp", mode)?;
    let done = f.write_all(bytes).and_then(|_| f.sync_all()).and_then(|_| dir.rename(&tmp, name));
    if done.is_err() {
        let _ = dir.remove(&tmp);
    }
    done
}

/// Open a regular file at `spot` to read; None when it or its directory is absent.
pub(crate) fn open_read(spot: &Spot) -> io::Result<Option<File>> {
    let (dir, name) = spot.dir_and_name()?;
    match Dir::open(&dir)? {
        Some(d) => d.open_read(name),
        None => Ok(None),
    }
}

/// The whole of a regular file at `spot`, at most `max` bytes (larger is refused
/// unread); None when absent.
pub(crate) fn read_bounded(spot: &Spot, max: u64) -> io::Result<Option<Vec<u8>>> {
    let Some(f) = open_read(spot)? else { return Ok(None) };
    read_all_bounded(f, &spot.path(), max).map(Some)
}

/// A file the operator names on the command line (a TLS certificate, a password file),
/// not one in a home: its links are followed (a secrets mount links them), but only a
/// regular file is read (a FIFO is never waited on), at most `max` bytes.
pub(crate) fn read_named(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let kind = FileType::from_raw_mode(rustix::fs::fstat(&f)?.st_mode);
    if kind != FileType::RegularFile {
        return Err(refusal(path, &format!("is {}, not a file", kind_name(kind))));
    }
    read_all_bounded(f, path, max)
}

/// Read an opened file whole, refusing more than `max` bytes.
pub(crate) fn read_all_bounded(mut f: File, shown: &Path, max: u64) -> io::Result<Vec<u8>> {
    let size = f.metadata()?.len();
    if size > max {
        return Err(refusal(shown, &format!("is larger than the {} limit ({size} bytes)", bytes_text(max))));
    }
    let mut bytes = Vec::with_capacity(size as usize + 1);
    (&mut f).take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(refusal(shown, &format!("is larger than the {} limit", bytes_text(max))));
    }
    Ok(bytes)
}

fn bytes_text(n: u64) -> String {
    if n >= 1024 * 1024 { format!("{} MiB", n / (1024 * 1024)) } else { format!("{} KiB", n / 1024) }
}

/// The longest line a journal or audit file may hold for it to be read (a longer one is
/// skipped and counted).
pub(crate) const MAX_LINE: usize = 1024 * 1024;

/// A file read line by line with memory bounded by `max` bytes a line: longer lines
/// and lines that are not UTF-8 are skipped and counted, never returned or kept.
pub(crate) struct Lines {
    reader: io::BufReader<File>,
    max: usize,
    line: Vec<u8>,
    pub counts: LineCounts,
    /// A read error that ended the file early.
    pub error: Option<io::Error>,
}

impl Lines {
    pub(crate) fn new(f: File, max: usize) -> Lines {
        Lines {
            reader: io::BufReader::with_capacity(64 * 1024, f),
            max,
            line: Vec::new(),
            counts: LineCounts::default(),
            error: None,
        }
    }

    /// The next good line, or None at the end of the file.
    pub(crate) fn next_line(&mut self) -> Option<&str> {
        loop {
            match self.read_raw() {
                Ok(false) => return None,
                Ok(true) => {
                    self.counts.lines += 1;
                    if std::str::from_utf8(&self.line).is_ok() {
                        return std::str::from_utf8(&self.line).ok();
                    }
                    self.counts.bad += 1;
                }
                Err(e) => {
                    self.error = Some(e);
                    return None;
                }
            }
        }
    }

    /// Pass over what is left of a line the reader starts in the middle of (after a
    /// seek), neither returned nor counted.
    pub(crate) fn skip_partial_line(&mut self) {
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            };
            if buf.is_empty() {
                return;
            }
            let (used, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            self.reader.consume(used);
            if done {
                return;
            }
        }
    }

    /// Read one line into `self.line`; a line over the bound is skipped and counted
    /// here. False at the end.
    fn read_raw(&mut self) -> io::Result<bool> {
        loop {
            self.line.clear();
            let mut too_long = false;
            let mut any = false;
            loop {
                let buf = match self.reader.fill_buf() {
                    Ok(b) => b,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                if buf.is_empty() {
                    break;
                }
                any = true;
                let (chunk, end) = match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => (&buf[..i], Some(i + 1)),
                    None => (buf, None),
                };
                if !too_long {
                    if self.line.len() + chunk.len() > self.max {
                        too_long = true;
                        self.line.clear();
                    } else {
                        self.line.extend_from_slice(chunk);
                    }
                }
                let used = end.unwrap_or(buf.len());
                self.reader.consume(used);
                if end.is_some() {
                    break;
                }
            }
            if !any {
                return Ok(false);
            }
            if !too_long {
                return Ok(true);
            }
            self.counts.lines += 1;
            self.counts.bad += 1;
        }
    }
}

/// What a line-by-line read found besides its lines.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineCounts {
    pub lines: u64,
    /// Lines longer than the bound (skipped unread past it) or not UTF-8.
    pub bad: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spots_split_a_path_under_its_home() {
        let s = Spot::in_subdir(Path::new("/h/.hermes/runtime/active_sessions.json"));
        assert_eq!(
            (s.home.as_path(), s.rel.as_path()),
            (Path::new("/h/.hermes"), Path::new("runtime/active_sessions.json"))
        );
        let s = Spot::in_home(Path::new("/h/.hermes/config.yaml"));
        assert_eq!((s.home.as_path(), s.rel.as_path()), (Path::new("/h/.hermes"), Path::new("config.yaml")));
    }

    /// A command that ends once done opens its home once: every later file of it is
    /// reached from the directory it checked then, so a home swapped in under the same
    /// path afterwards is not seen; another home named is opened (and kept) instead; and a
    /// thread that did not ask opens the path anew each time.
    #[test]
    fn a_thread_that_keeps_its_home_open_opens_it_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        let other = dir.path().join("other");
        for (d, said) in [(&home, "first"), (&other, "other")] {
            std::fs::create_dir(d).expect("mkdir");
            std::fs::write(d.join("config.yaml"), said).expect("write");
        }
        let said = |h: &Path| {
            let text = read_bounded(&Spot::new(h, "config.yaml"), 1024).expect("read").expect("there");
            String::from_utf8(text).expect("utf-8")
        };
        let swap_in_a_home_saying = |home: &Path, text: &str| {
            std::fs::rename(home, dir.path().join(format!("before-{text}"))).expect("move the home away");
            std::fs::create_dir(home).expect("mkdir");
            std::fs::write(home.join("config.yaml"), text).expect("write");
        };
        let kept = std::thread::scope(|s| {
            s.spawn(|| {
                keep_the_home_open();
                let before = said(&home);
                swap_in_a_home_saying(&home, "second");
                let after = said(&home);
                // Another home in between is opened and kept in its place.
                let between = said(&other);
                let last = said(&home);
                (before, after, between, last)
            })
            .join()
            .expect("the keeping thread")
        });
        assert_eq!(kept, ("first".into(), "first".into(), "other".into(), "second".into()));
        // This thread never asked: it sees the home now at the path, each time.
        assert_eq!(said(&home), "second");
        swap_in_a_home_saying(&home, "third");
        assert_eq!(said(&home), "third");
    }

    #[test]
    fn symlinks_fifos_and_parent_steps_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        std::fs::create_dir(home.join("logs")).expect("mkdir");
        std::os::unix::fs::symlink("/etc/passwd", home.join("logs/link")).expect("symlink");
        rustix::fs::mknodat(rustix::fs::CWD, home.join("logs/fifo"), FileType::Fifo, Mode::from_raw_mode(0o600), 0)
            .expect("mkfifo");
        std::os::unix::fs::symlink("/tmp", home.join("runtime")).expect("symlink");
        for rel in ["logs/link", "logs/fifo", "runtime/x", "../x"] {
            let e = read_bounded(&Spot::new(home, rel), 1024).expect_err(rel);
            assert!(is_refusal(&e), "{rel}: {e}");
        }
        assert!(read_bounded(&Spot::new(home, "logs/absent"), 1024).expect("absent").is_none());
        assert!(Dir::create(&Spot::new(home.join("nope"), "runtime")).is_err(), "no home: nothing created");
        assert!(!home.join("nope").exists());
    }

    #[test]
    fn lines_are_bounded_and_bad_ones_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        let mut text = b"one\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 100));
        text.extend(b"\ntw\xffo\nthree");
        std::fs::write(&p, &text).expect("write");
        let mut seen = vec![];
        let mut lines = Lines::new(File::open(&p).expect("open"), 50);
        while let Some(l) = lines.next_line() {
            seen.push(l.to_owned());
        }
        assert_eq!(seen, ["one", "three"]);
        assert_eq!(lines.counts, LineCounts { lines: 4, bad: 2 });
        // Started inside the long line: what is left of it is passed over, uncounted.
        let mut f = File::open(&p).expect("open");
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(10)).expect("seek");
        let mut lines = Lines::new(f, 50);
        lines.skip_partial_line();
        assert_eq!(lines.next_line(), Some("three"), "the line after it is the first read");
        assert_eq!(lines.counts, LineCounts { lines: 2, bad: 1 }, "tw\\xffo is not UTF-8");
    }
}
