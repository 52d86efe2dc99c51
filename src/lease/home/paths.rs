//! Where registries live (spec §1): home resolution, the root, and its profiles.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::lease::home::profiles::{ProfilesDir, Standing};
use crate::lease::words::unusable::Unusable;

/// Registry file name inside `<home>/runtime/`.
pub const REGISTRY_FILE: &str = "active_sessions.json";
/// Lock file name inside `<home>/runtime/` (never written, renamed or deleted).
pub const LOCK_FILE: &str = "active_sessions.lock";
/// The directory in a home that holds the registry and its lock.
pub const RUNTIME_DIR: &str = "runtime";
/// Prefix and suffix of Hermes' temp files beside the registry.
pub const TEMP_PREFIX: &str = ".active_sessions_";
pub const TEMP_SUFFIX: &str = ".tmp";

/// One home's registry: the root home or one profile. Its names are shared by every
/// copy (a console keeps one for each tab and each store, 100,000 profiles of them).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Registry(Arc<RegistryPlace>);

/// What names a registry: read through a [`Registry`] (`registry.home`). Two are the
/// same registry when their name and home are: a standing is what was seen last.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RegistryPlace {
    /// `"root"` or the profile's directory name.
    pub profile: String,
    pub home: PathBuf,
    /// Whether the directory is a profile by Hermes 0.22's rules; a registry left in one
    /// that is not (deleted, no identity) is still listed, marked.
    #[serde(default, skip_serializing_if = "Standing::is_live")]
    pub standing: Standing,
}

impl PartialEq for RegistryPlace {
    fn eq(&self, other: &RegistryPlace) -> bool {
        self.profile == other.profile && self.home == other.home
    }
}

impl Eq for RegistryPlace {}

impl std::hash::Hash for RegistryPlace {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.profile.hash(state);
        self.home.hash(state);
    }
}

impl std::ops::Deref for Registry {
    type Target = RegistryPlace;
    fn deref(&self) -> &RegistryPlace {
        &self.0
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl serde::Serialize for Registry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Registry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Registry, D::Error> {
        RegistryPlace::deserialize(deserializer).map(|place| Registry(Arc::new(place)))
    }
}

impl Registry {
    pub fn new(profile: impl Into<String>, home: impl Into<PathBuf>) -> Registry {
        Registry(Arc::new(RegistryPlace { profile: profile.into(), home: home.into(), standing: Standing::Live }))
    }
    /// A registry in a directory under `profiles/` that is no profile by 0.22's rules.
    pub fn with_standing(profile: impl Into<String>, home: impl Into<PathBuf>, standing: Standing) -> Registry {
        Registry(Arc::new(RegistryPlace { profile: profile.into(), home: home.into(), standing }))
    }
    /// Its names, taken (copied only while another copy shares them).
    pub fn into_place(self) -> RegistryPlace {
        Arc::unwrap_or_clone(self.0)
    }
    pub fn runtime_dir(&self) -> PathBuf {
        self.home.join(RUNTIME_DIR)
    }
    pub fn path(&self) -> PathBuf {
        self.runtime_dir().join(REGISTRY_FILE)
    }
    pub fn lock_path(&self) -> PathBuf {
        self.runtime_dir().join(LOCK_FILE)
    }
    pub fn config_path(&self) -> PathBuf {
        self.home.join("config.yaml")
    }
}

/// Why `home` cannot be used as a Hermes home, if so: not there, not a directory, or
/// behind a directory this user cannot search (not the same as missing: it read "does
/// not exist").
pub fn home_problem(home: &Path) -> Option<String> {
    match std::fs::metadata(home) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some(format!("the Hermes home {} is not a directory", home.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some(format!("the Hermes home {} does not exist", home.display()))
        }
        Err(e) => Some(format!(
            "cannot reach the Hermes home {}: {e} (uid {} cannot search it or a directory above it)",
            home.display(),
            rustix::process::getuid().as_raw()
        )),
    }
}

/// The home: the one named (`--home`, or `$HERMES_HOME` as the CLI's parser read it,
/// trimmed and non-empty), else `~/.hermes`.
pub fn resolve_home(named: Option<&Path>) -> Result<PathBuf, Unusable> {
    if let Some(dir) = named {
        if dir.as_os_str().is_empty() {
            return Err(Unusable("--home needs a directory, and was given an empty one".into()));
        }
        return Ok(dir.to_path_buf());
    }
    // `$HOME`, else the passwd entry: where Python's `Path.home()`, and so Hermes, looks.
    match dirs::home_dir() {
        Some(h) => Ok(h.join(".hermes")),
        None => Err(Unusable(
            "cannot find the Hermes home: pass --home DIR or set HERMES_HOME (HOME is not set and the user has no \
             home in passwd)"
                .into(),
        )),
    }
}

/// Whether `p` is named as a home's runtime directory.
pub fn is_runtime_dir(p: &Path) -> bool {
    p.file_name().is_some_and(|n| n == RUNTIME_DIR)
}

/// A registry, its lock file or a home's config.yaml: a file in a home, no directory.
pub fn is_home_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str());
    matches!(name, Some(REGISTRY_FILE | LOCK_FILE | "config.yaml"))
}

/// The homes whose registry a changed path can be part of: the path itself (a home),
/// the home of a runtime directory, of a file in one, and of a config.yaml.
pub fn homes_touched(p: &Path) -> impl Iterator<Item = &Path> {
    let parent = p.parent();
    let in_runtime = parent.filter(|d| is_runtime_dir(d)).and_then(Path::parent);
    let of_runtime = parent.filter(|_| is_runtime_dir(p));
    let of_config = parent.filter(|_| p.file_name().is_some_and(|n| n == "config.yaml"));
    [Some(p), in_runtime, of_runtime, of_config].into_iter().flatten()
}

/// The root of a home: `<root>/profiles/<name>` belongs to `<root>`; any other home is its own root.
pub fn root_of(home: &Path) -> PathBuf {
    if let (Some(parent), Some(grand)) = (home.parent(), home.parent().and_then(Path::parent))
        && parent.file_name().is_some_and(|n| n == "profiles")
        && home.file_name().is_some()
    {
        return grand.to_path_buf();
    }
    home.to_path_buf()
}

/// Whether `dir` is (or, gone, was) a profile of `root`: `<root>/profiles/<name>`, with a
/// name [`all_registries`] would list (UTF-8, not starting with '.').
pub fn is_profile_of(root: &Path, dir: &Path) -> bool {
    is_in_profiles_of(root, dir) && dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.'))
}

/// Whether `dir` is (or, gone, was) directly in `<root>/profiles`: a profile, or a
/// directory named as none is (hidden).
pub fn is_in_profiles_of(root: &Path, dir: &Path) -> bool {
    dir != root && root_of(dir) == root
}

/// The registry a home stands for, named `root` or after its profile.
pub fn registry_for_home(home: &Path) -> Registry {
    let root = root_of(home);
    if root != home {
        let name = home.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        // Marked as listed when it is there but no profile by 0.22's rules.
        let standing = if home.is_dir() { ProfilesDir::open(&root).standing(&name) } else { Standing::Live };
        Registry::with_standing(name, home, standing)
    } else {
        Registry::new("root", home)
    }
}

/// A named profile of the root (`<root>/profiles/<name>`). The name must be a plain directory name.
pub fn profile_registry(root: &Path, name: &str) -> Result<Registry, Unusable> {
    if name.is_empty() || name.starts_with('.') || name.contains('/') || name.contains('\0') {
        return Err(Unusable(format!("invalid profile name {name:?}: a plain directory name not starting with '.'")));
    }
    Ok(Registry::new(name, root.join("profiles").join(name)))
}

/// The root and every profile (`<root>/profiles/<name>/`, live by Hermes 0.22's rules),
/// sorted; then every other directory there (names not starting with `.`) whose registry
/// still holds leases, marked with its standing: never hidden while it holds any.
pub fn all_registries(root: &Path) -> Vec<Registry> {
    let mut out = vec![Registry::new("root", root)];
    // Through the one door: a `profiles` symlink is not followed, and a profile that is a
    // symlink (or anything but a directory) is not a profile.
    let profiles = ProfilesDir::open(root);
    for (name, standing) in profiles.directories() {
        let home = root.join("profiles").join(&name);
        if standing.is_live() {
            out.push(Registry::new(name, home));
        } else if holds_leases(&home) {
            out.push(Registry::with_standing(name, home, standing));
        }
    }
    out
}

/// The registry of the directory `<root>/profiles/<name>` as [`all_registries`] would
/// list it: a live profile's, or a registry still holding leases, marked; else None.
pub fn listed_profile(root: &Path, name: &str) -> Option<Registry> {
    let home = root.join("profiles").join(name);
    if name.starts_with('.') || !std::fs::symlink_metadata(&home).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let standing = ProfilesDir::open(root).standing(name);
    if standing.is_live() {
        Some(Registry::new(name, home))
    } else {
        holds_leases(&home).then(|| Registry::with_standing(name, home, standing))
    }
}

/// The root and every directory in `<root>/profiles` (names not starting with `.`),
/// profile or not: what a watcher watches, so that an identity file or a registry
/// appearing in one is seen.
pub fn all_homes(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    out.extend(ProfilesDir::open(root).directories().into_iter().map(|(n, _)| root.join("profiles").join(n)));
    out
}

/// Whether the registry in `home` holds any entry (or cannot be read: then it is shown,
/// so its problem is seen).
fn holds_leases(home: &Path) -> bool {
    let spot = crate::lease::home::safe_file::Spot::new(home, Path::new(RUNTIME_DIR).join(REGISTRY_FILE));
    match crate::lease::home::safe_file::read_bounded(&spot, 1 << 16) {
        Ok(None) => false,
        Ok(Some(bytes)) => {
            let text = String::from_utf8_lossy(&bytes);
            let body = text.trim_start_matches('\u{feff}').trim();
            !matches!(body, "" | "[]" | "{\"entries\": []}" | "{\"entries\":[]}")
        }
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::Location;

    /// A console keeps a registry's location for each tab and each store, 100,000 of
    /// each: a copy shares the names, and reads and (de)serializes as the original.
    #[test]
    fn a_registrys_copies_share_its_names() {
        let reg = Registry::new("p1", "/h/profiles/p1");
        let copy = reg.clone();
        assert!(std::ptr::eq(reg.profile.as_ptr(), copy.profile.as_ptr()), "the profile name is not copied");
        assert!(std::ptr::eq(reg.home.as_os_str(), copy.home.as_os_str()), "nor the home");
        assert_eq!(copy, reg);
        let json = serde_json::to_string(&reg).expect("serialized");
        assert_eq!(json, r#"{"profile":"p1","home":"/h/profiles/p1"}"#);
        assert_eq!(serde_json::from_str::<Registry>(&json).expect("read back"), reg);
        assert_eq!(std::mem::size_of::<crate::lease::Location>(), 16, "a location is two words");
    }

    #[test]
    fn profile_home_has_its_root() {
        assert_eq!(root_of(Path::new("/h/.hermes/profiles/work")), PathBuf::from("/h/.hermes"));
        assert_eq!(root_of(Path::new("/h/.hermes")), PathBuf::from("/h/.hermes"));
        assert_eq!(registry_for_home(Path::new("/r/profiles/work")).profile, "work");
        assert_eq!(registry_for_home(Path::new("/r")).profile, "root");
    }

    #[test]
    fn a_profile_is_a_named_directory_of_its_roots_profiles() {
        let root = Path::new("/r");
        assert!(is_profile_of(root, Path::new("/r/profiles/work")));
        assert!(is_profile_of(root, Path::new("/r/profiles/runtime")));
        assert!(!is_profile_of(root, Path::new("/r/profiles/.hidden")));
        assert!(is_in_profiles_of(root, Path::new("/r/profiles/.hidden")));
        assert!(!is_profile_of(root, Path::new("/r/profiles")));
        assert!(!is_profile_of(root, root));
        assert!(!is_profile_of(root, Path::new("/r/profiles/work/runtime")));
        assert!(!is_profile_of(root, Path::new("/other/profiles/work")));
    }

    #[test]
    fn profiles_are_discovered_sorted_without_hidden() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["zeta", "alpha", ".hidden", "ghost", "gone"] {
            std::fs::create_dir_all(dir.path().join("profiles").join(name).join(RUNTIME_DIR)).expect("mkdir");
            if name != "ghost" {
                std::fs::write(dir.path().join("profiles").join(name).join("config.yaml"), "").expect("write");
            }
        }
        std::fs::write(dir.path().join("profiles").join("file"), "").expect("write");
        std::fs::create_dir_all(dir.path().join("profiles/.deleted")).expect("mkdir");
        std::fs::write(dir.path().join("profiles/.deleted/gone"), "deleted\n").expect("write");
        let found = |dir: &Path| -> Vec<String> {
            all_registries(dir).into_iter().map(|r| Location::File(r).label()).collect()
        };
        // Neither the directory with no identity nor the deleted profile, while empty.
        assert_eq!(found(dir.path()), vec!["root", "alpha", "zeta"]);
        std::fs::write(dir.path().join("profiles/gone/runtime/active_sessions.json"), r#"{"entries": []}"#)
            .expect("write");
        assert_eq!(found(dir.path()), vec!["root", "alpha", "zeta"], "an empty registry is no reason to list one");
        // Holding leases, both are listed, marked.
        let held = r#"{"entries": [{"lease_id": "a", "pid": 1, "session_id": "S"}]}"#;
        for name in ["gone", "ghost"] {
            std::fs::write(dir.path().join("profiles").join(name).join("runtime/active_sessions.json"), held)
                .expect("write");
        }
        assert_eq!(found(dir.path()), vec!["root", "alpha", "ghost (no identity)", "gone (deleted)", "zeta"]);
    }

    #[test]
    fn bad_profile_names_are_refused() {
        assert!(profile_registry(Path::new("/r"), "../x").is_err());
        assert!(profile_registry(Path::new("/r"), ".x").is_err());
        assert!(profile_registry(Path::new("/r"), "ok").is_ok());
    }
}
