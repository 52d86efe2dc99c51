//! Which directories under `<root>/profiles/` are profiles, by Hermes 0.22's rules: a
//! valid id, an identity file, and no tombstone (`profiles/.deleted/NAME`, which
//! `hermes profile delete` writes). Older releases took every directory for one;
//! leasectl follows 0.22, and still shows a registry left where no profile is, marked.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::lease::home::safe_file::{Dir, Spot};

/// Files whose presence makes a directory under `profiles/` a profile (any one of them,
/// a symlink too: Hermes counts a dangling one as a claim).
pub const IDENTITY_FILES: [&str; 6] = ["config.yaml", ".env", "SOUL.md", "profile.yaml", "auth.json", "state.db"];
/// The directory beside the profiles that holds one tombstone per deleted profile.
pub const TOMBSTONES: &str = ".deleted";
/// How a refused claim in a deleted or missing profile begins (0.22's words).
pub const NO_PROFILE_HOME: &str = "Named profile home does not exist: ";
/// Files that mark a root as a Hermes home (0.22's `_HERMES_HOME_MARKERS`).
const HOME_MARKERS: [&str; 3] = ["config.yaml", ".env", "state.db"];

/// What a directory under `profiles/` is to Hermes 0.22.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// A profile: listed, and a session may be claimed in it.
    #[default]
    Live,
    /// `hermes profile delete` left a tombstone for it.
    Deleted,
    /// A directory with none of the identity files (a cron or log side effect, or the
    /// shell a failed `profile create` left).
    NoIdentity,
    /// A name that is no profile id (`^[a-z0-9][a-z0-9_-]{0,63}$`, and not `default`).
    NotAnId,
}

impl Standing {
    pub fn is_live(&self) -> bool {
        *self == Standing::Live
    }

    /// The short mark tabs and tables show after the name.
    pub fn mark(&self) -> &'static str {
        match self {
            Standing::Live => "",
            Standing::Deleted => "deleted",
            Standing::NoIdentity => "no identity",
            Standing::NotAnId => "not a profile id",
        }
    }

    /// Why, in a few words (a banner's): `deleted (profiles/.deleted/NAME)`.
    pub fn short(&self, name: &str) -> String {
        match self {
            Standing::Deleted => format!("deleted (profiles/{TOMBSTONES}/{name})"),
            other => other.mark().to_owned(),
        }
    }

    /// Why the directory is no profile, in a sentence.
    pub fn explain(&self, name: &str) -> String {
        match self {
            Standing::Live => format!("profile {name}"),
            Standing::Deleted => {
                format!("profile {name} was deleted (profiles/{TOMBSTONES}/{name} is its tombstone)")
            }
            Standing::NoIdentity => format!(
                "profiles/{name} holds none of a profile's identity files ({}): Hermes 0.22 does not list it",
                IDENTITY_FILES.join(", ")
            ),
            Standing::NotAnId => format!("{name} is not a profile id (lowercase letters, digits, '_' and '-')"),
        }
    }
}

/// Hermes' profile id grammar: `^[a-z0-9][a-z0-9_-]{0,63}$`, and never `default`.
pub fn is_profile_id(name: &str) -> bool {
    let bytes = name.as_bytes();
    let first_ok = bytes.first().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    first_ok
        && bytes.len() <= 64
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
        && name != "default"
}

/// The profiles directory of one root, read once: its names and its tombstones.
pub struct ProfilesDir {
    dir: Option<Dir>,
    tombstones: Vec<std::ffi::OsString>,
}

impl ProfilesDir {
    /// `<root>/profiles`, through the one door (a symlinked `profiles` is not followed).
    pub fn open(root: &Path) -> ProfilesDir {
        let dir = Dir::open(&Spot::new(root, "profiles")).ok().flatten();
        let tombstones = Dir::open(&Spot::new(root, Path::new("profiles").join(TOMBSTONES)))
            .ok()
            .flatten()
            .and_then(|d| d.names().ok())
            .unwrap_or_default();
        ProfilesDir { dir, tombstones }
    }

    /// Every directory in it whose name does not start with '.', with its standing.
    pub fn directories(&self) -> Vec<(String, Standing)> {
        let Some(dir) = &self.dir else { return Vec::new() };
        let mut out: Vec<(String, Standing)> = dir
            .names()
            .unwrap_or_default()
            .into_iter()
            .filter(|n| matches!(dir.kind(n), Ok(Some(rustix::fs::FileType::Directory))))
            .filter_map(|n| n.into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .map(|n| {
                let standing = self.standing(&n);
                (n, standing)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The standing of the directory `name` (which exists).
    pub fn standing(&self, name: &str) -> Standing {
        if self.tombstones.iter().any(|t| t == OsStr::new(name)) {
            Standing::Deleted
        } else if !is_profile_id(name) {
            Standing::NotAnId
        } else if !self.has_identity(name) {
            Standing::NoIdentity
        } else {
            Standing::Live
        }
    }

    fn has_identity(&self, name: &str) -> bool {
        let Some(dir) = &self.dir else { return false };
        IDENTITY_FILES.iter().any(|f| {
            // Never followed: a symlink is a claim, as Hermes counts it; a directory is none.
            matches!(
                dir.kind(Path::new(name).join(f)),
                Ok(Some(rustix::fs::FileType::RegularFile | rustix::fs::FileType::Symlink))
            )
        })
    }
}

/// The named profile home `home` is in, as 0.22's `named_profile_home` finds it:
/// `<root>/profiles/<name>` (the home or a directory above it), where `<root>` is
/// provably a Hermes home (named `.hermes`, holding a home marker file, or with a
/// tombstone directory beside its profiles).
pub fn named_profile_home(home: &Path) -> Option<PathBuf> {
    for candidate in home.ancestors() {
        let (Some(parent), Some(name)) = (candidate.parent(), candidate.file_name()) else { break };
        if parent.file_name() == Some(OsStr::new("profiles"))
            && !name.to_string_lossy().starts_with('.')
            && is_hermes_root(parent.parent().unwrap_or(Path::new("/")), parent)
        {
            return Some(candidate.to_path_buf());
        }
        if name == ".hermes" {
            return None;
        }
    }
    None
}

fn is_hermes_root(root: &Path, profiles: &Path) -> bool {
    root.file_name() == Some(OsStr::new(".hermes"))
        || profiles.join(TOMBSTONES).is_dir()
        || HOME_MARKERS.iter().any(|m| root.join(m).symlink_metadata().is_ok())
}

/// Why a session may not be claimed with `home` as the Hermes home: it is in a named
/// profile that was deleted or is missing. Hermes 0.22 refuses these in the same words,
/// so a claim never brings a deleted profile back to disk.
pub fn claim_problem(home: &Path) -> Option<String> {
    let profile = named_profile_home(home)?;
    let name = profile.file_name()?.to_string_lossy().into_owned();
    let tombstone = profile.parent()?.join(TOMBSTONES).join(&name);
    let why = if tombstone.symlink_metadata().is_ok() {
        format!("{} marks it deleted", tombstone.display())
    } else if !profile.exists() {
        "it is not there".to_owned()
    } else {
        return None;
    };
    Some(format!("{NO_PROFILE_HOME}{}. Create the profile explicitly before using it. ({why})", profile.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_ids_follow_hermes_grammar() {
        for ok in ["work", "a", "0", "a-b_c", &"x".repeat(64)] {
            assert!(is_profile_id(ok), "{ok}");
        }
        for bad in ["", "Work", "-a", "_a", "a.b", "default", "ü", &"x".repeat(65), "a b"] {
            assert!(!is_profile_id(bad), "{bad}");
        }
    }

    #[test]
    fn standings_follow_identity_tombstone_and_name() {
        let root = tempfile::tempdir().expect("tempdir");
        let p = root.path().join("profiles");
        for (name, file) in
            [("live", Some("config.yaml")), ("bare", None), ("gone", Some("SOUL.md")), ("Caps", Some(".env"))]
        {
            std::fs::create_dir_all(p.join(name).join("runtime")).expect("mkdir");
            if let Some(f) = file {
                std::fs::write(p.join(name).join(f), "").expect("write");
            }
        }
        std::os::unix::fs::symlink("/nonexistent", p.join("bare2")).ok();
        std::fs::create_dir_all(p.join("linked")).expect("mkdir");
        std::os::unix::fs::symlink("/nonexistent", p.join("linked").join("auth.json")).expect("symlink");
        std::fs::create_dir_all(p.join(".deleted")).expect("mkdir");
        std::fs::write(p.join(".deleted").join("gone"), "deleted\n").expect("write");
        let found = ProfilesDir::open(root.path()).directories();
        assert_eq!(
            found,
            vec![
                ("Caps".into(), Standing::NotAnId),
                ("bare".into(), Standing::NoIdentity),
                ("gone".into(), Standing::Deleted),
                ("linked".into(), Standing::Live),
                ("live".into(), Standing::Live),
            ]
        );
    }

    #[test]
    fn a_claim_in_a_deleted_or_missing_profile_of_a_hermes_root_is_refused() {
        let root = tempfile::tempdir().expect("tempdir");
        let p = root.path().join("profiles");
        std::fs::create_dir_all(p.join("gone")).expect("mkdir");
        // No marker yet: a directory merely named profiles/ is no Hermes root.
        assert_eq!(claim_problem(&p.join("new")), None);
        std::fs::write(root.path().join("config.yaml"), "").expect("write");
        let missing = claim_problem(&p.join("new")).expect("missing profile refused");
        assert!(missing.starts_with("Named profile home does not exist: "), "{missing}");
        assert!(missing.contains("it is not there"), "{missing}");
        assert_eq!(claim_problem(&p.join("gone")), None);
        std::fs::create_dir_all(p.join(".deleted")).expect("mkdir");
        std::fs::write(p.join(".deleted").join("gone"), "deleted\n").expect("write");
        let deleted = claim_problem(&p.join("gone").join("sub")).expect("deleted profile refused");
        assert!(deleted.contains("marks it deleted"), "{deleted}");
        assert_eq!(claim_problem(root.path()), None, "the root is no named profile");
    }
}
