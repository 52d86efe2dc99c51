//! Bash completion as bash runs it: the generated script sourced in a real bash, the
//! words typed so far set as bash sets them, and what it offers read back. `--profile`
//! offers the home's profiles (it offered files), a lease id the registry's ids, and a
//! profile whose name bash would expand is never offered.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::process::{BIN, Sleeper, leasectl};

/// What bash offers after `words` (the last one being typed), leasectl on PATH.
fn offered(script: &Path, words: &[&str], env_home: Option<&Path>) -> Vec<String> {
    offered_with(script, words, env_home, None)
}

/// [`offered`] with `XDG_CONFIG_HOME` set (where the hosts file is).
fn offered_with(script: &Path, words: &[&str], env_home: Option<&Path>, config: Option<&Path>) -> Vec<String> {
    let bin_dir = Path::new(BIN).parent().expect("bin dir");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{}'", w.replace('\'', "'\\''"))).collect();
    let program = format!(
        "source {}; COMP_WORDS=({}); COMP_CWORD={}; _leasectl_dynamic leasectl; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1
    );
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(program).env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display())).stdin(Stdio::null());
    cmd.env_remove("HERMES_HOME");
    if let Some(h) = env_home {
        cmd.env("HERMES_HOME", h);
    }
    if let Some(c) = config {
        cmd.env("XDG_CONFIG_HOME", c);
    }
    let out = cmd.output().expect("bash");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut words: Vec<String> =
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
    words.sort();
    words
}

#[test]
fn bash_completes_profiles_and_lease_ids_of_the_home_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    for p in ["ops", "work", "$(touch pwned)"] {
        std::fs::create_dir_all(home.join("profiles").join(p)).expect("profile");
        std::fs::write(home.join("profiles").join(p).join("config.yaml"), "").expect("its identity file");
    }
    let owner = Sleeper::new();
    let pid = owner.pid_arg();
    let mut ids = Vec::new();
    for (profile, session) in [(None, "S1"), (None, "S2"), (Some("work"), "W1")] {
        let mut args: Vec<&str> = vec![];
        if let Some(p) = profile {
            args.extend(["--profile", p]);
        }
        args.extend(["acquire", session, "--owner-pid", &pid, "--json"]);
        let out = leasectl(&home, &args).output().expect("acquire");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        ids.push(v["lease_id"].as_str().expect("id")[..8].to_owned());
    }
    let script = dir.path().join("leasectl.bash");
    let out = Command::new(BIN).args(["completions", "bash"]).output().expect("completions");
    std::fs::write(&script, &out.stdout).expect("script");
    let h = home.to_str().expect("utf-8");

    assert_eq!(offered(&script, &["leasectl", "--home", h, "--profile", ""], None), ["ops", "work"]);
    assert_eq!(offered(&script, &["leasectl", "--profile", "w"], Some(&home)), ["work"], "HERMES_HOME");
    let mut root_ids = ids[..2].to_vec();
    root_ids.sort();
    assert_eq!(offered(&script, &["leasectl", "--home", h, "force-release", ""], None), root_ids);
    assert_eq!(
        offered(&script, &["leasectl", "--home", h, "--profile", "work", "release", ""], None),
        [ids[2].clone()]
    );
    assert!(!dir.path().join("pwned").exists() && !Path::new("pwned").exists(), "a profile's name ran");
    // --host: the hosts file's names ($XDG_CONFIG_HOME/leasectl/hosts).
    let config = dir.path().join("config");
    std::fs::create_dir_all(config.join("leasectl")).expect("config dir");
    std::fs::write(config.join("leasectl/hosts"), "gw1=ssh://gw1.example.net\ngw2=ssh://gw2.example.net\n")
        .expect("hosts file");
    assert_eq!(offered_with(&script, &["leasectl", "--host", "g"], None, Some(&config)), ["gw1", "gw2"]);
    // The rest is clap's: subcommands.
    assert!(offered(&script, &["leasectl", "force-r"], None).contains(&"force-release".to_owned()));
}
