//! The demo's home: a fresh temp directory (removed on exit) or a `--home` the
//! operator chose (kept), plus every owner process the demo spawned (killed on exit).

use std::path::{Path, PathBuf};
use std::process::Child;

use crate::lease::Registry;

/// One owner process the demo started.
#[derive(Debug)]
pub struct Spawned {
    pub child: Child,
    pub session: String,
    pub surface: String,
    pub live_id: String,
    /// The lease its own `hold` acquired, if granted.
    pub lease_id: Option<String>,
    pub killed: bool,
}

#[derive(Debug)]
pub struct Sandbox {
    home: PathBuf,
    /// True when the demo created `home` and must remove it.
    owned: bool,
    pub owners: Vec<Spawned>,
}

impl Sandbox {
    /// A new, empty home under the system temp directory.
    pub fn create_temp() -> std::io::Result<Sandbox> {
        let base = std::env::temp_dir();
        for _ in 0..100 {
            let tag: String = crate::lease::address::ids::lease_id().chars().take(10).collect();
            let home = base.join(format!("leasectl-demo-{tag}"));
            // one door: creating the sandbox itself (exclusively), not a file in a home.
            match std::fs::create_dir(&home) {
                Ok(()) => return Ok(Sandbox { home, owned: true, owners: vec![] }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other("no free name for a demo sandbox"))
    }

    /// A home the operator named: used as is, never removed.
    pub fn at(home: &Path) -> std::io::Result<Sandbox> {
        // one door: the demo home the operator named is made, as the demo always did.
        std::fs::create_dir_all(home)?;
        Ok(Sandbox { home: home.to_path_buf(), owned: false, owners: vec![] })
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn owned(&self) -> bool {
        self.owned
    }

    pub fn registry(&self) -> Registry {
        Registry::new("root", self.home.clone())
    }

    /// Kill every owner still running and reap it.
    pub fn kill_all(&mut self) {
        for o in &mut self.owners {
            if !o.killed {
                let _ = o.child.kill();
                o.killed = true;
            }
            let _ = o.child.wait();
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.kill_all();
        if self.owned {
            // one door: removing the demo's own sandbox, which leasectl created.
            let _ = std::fs::remove_dir_all(&self.home);
        }
    }
}
