//! The cap (spec §6): `max_concurrent_sessions` in `<home>/config.yaml`, with
//! Hermes' precedence (top level, even null, wins over `gateway.`) and coercion.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

/// The resolved cap and any warnings about values that were ignored.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CapSetting {
    /// `None`: no cap.
    pub cap: Option<u64>,
    /// The key the value came from (`max_concurrent_sessions` or `gateway.max_concurrent_sessions`).
    pub key: Option<String>,
    pub warnings: Vec<String>,
}

/// Read the cap from a home's `config.yaml`. A missing file means no cap; an
/// unreadable or unparsable one means no cap, with a warning (capacity is policy;
/// exclusivity does not depend on it).
pub fn read_cap(config_path: &Path) -> CapSetting {
    let text = match read_config(config_path) {
        Ok(Some(t)) => t,
        Ok(None) => return CapSetting::default(),
        Err(e) => {
            return CapSetting {
                warnings: vec![format!("cannot read {}: {e}; no cap applied", config_path.display())],
                ..CapSetting::default()
            };
        }
    };
    match YamlLoader::load_from_str(&text) {
        Ok(docs) => resolve(docs.first().unwrap_or(&Yaml::Null)),
        Err(e) => CapSetting {
            warnings: vec![format!("cannot parse {}: {e}; no cap applied", config_path.display())],
            ..CapSetting::default()
        },
    }
}

/// leasectl's own key in a home's `config.yaml`, `leasectl: {idle_threshold: 2h}`: how
/// long a live owner's session may see no activity before its lease is a leak suspect.
/// Ok(None) when not set; Err names what is wrong with it.
pub fn read_idle_threshold(config_path: &Path) -> Result<Option<std::time::Duration>, String> {
    let text = match read_config(config_path) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("leasectl.idle_threshold not read: {e}")),
    };
    let Ok(docs) = YamlLoader::load_from_str(&text) else { return Ok(None) };
    let Some(Yaml::Hash(top)) = docs.first() else { return Ok(None) };
    let Some(Yaml::Hash(ours)) = top.get(&Yaml::String("leasectl".into())) else { return Ok(None) };
    let raw = match ours.get(&Yaml::String("idle_threshold".into())) {
        None | Some(Yaml::Null) => return Ok(None),
        Some(Yaml::String(s)) => s.clone(),
        Some(Yaml::Integer(i)) => i.to_string(),
        Some(Yaml::Real(r)) => r.clone(),
        Some(other) => return Err(format!("ignoring leasectl.idle_threshold in {}: {other:?}", config_path.display())),
    };
    crate::lease::words::human::parse_idle(&raw)
        .map(Some)
        .map_err(|e| format!("ignoring leasectl.idle_threshold {raw:?} in {}: {e}", config_path.display()))
}

/// A config.yaml larger than this is not a config file: refused unread.
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// A home's config.yaml through the one door (no symlink, FIFO or huge file); None when absent.
fn read_config(config_path: &Path) -> std::io::Result<Option<String>> {
    let spot = crate::lease::home::safe_file::Spot::in_home(config_path);
    let Some(bytes) = crate::lease::home::safe_file::read_bounded(&spot, MAX_CONFIG_BYTES)? else { return Ok(None) };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Hermes' `resolve_max_concurrent_sessions` on a parsed document.
pub fn resolve(doc: &Yaml) -> CapSetting {
    let key_top = Yaml::String("max_concurrent_sessions".into());
    let Yaml::Hash(top) = doc else {
        return CapSetting::default();
    };
    let (raw, key) = if let Some(v) = top.get(&key_top) {
        (v, "max_concurrent_sessions")
    } else {
        match top.get(&Yaml::String("gateway".into())) {
            Some(Yaml::Hash(gw)) => match gw.get(&key_top) {
                Some(v) => (v, "gateway.max_concurrent_sessions"),
                None => return CapSetting::default(),
            },
            _ => return CapSetting::default(),
        }
    };
    let mut setting = CapSetting { key: Some(key.into()), ..CapSetting::default() };
    match coerce(raw) {
        Ok(cap) => setting.cap = cap,
        Err(shown) => setting
            .warnings
            .push(format!("ignoring invalid {key}={shown} (expected a positive integer; 0/null disables)")),
    }
    setting
}

/// Hermes' `coerce_max_concurrent_sessions`: Ok(None) disables, Err is "ignored, warn".
fn coerce(v: &Yaml) -> Result<Option<u64>, String> {
    let parsed: i128 = match v {
        Yaml::Null => return Ok(None),
        Yaml::Boolean(b) => return Err(if *b { "True".into() } else { "False".into() }),
        Yaml::Integer(i) => i128::from(*i),
        Yaml::Real(text) => {
            let f = text.parse::<f64>().ok().or_else(|| yaml_special_float(text));
            match f {
                Some(f) if f.is_finite() && f.fract() == 0.0 => f as i128,
                _ => return Err(text.clone()),
            }
        }
        Yaml::String(s) => parse_base10(s).ok_or_else(|| format!("{s:?}"))?,
        other => return Err(format!("{other:?}")),
    };
    Ok(u64::try_from(parsed).ok().filter(|n| *n > 0))
}

fn yaml_special_float(text: &str) -> Option<f64> {
    match text.to_ascii_lowercase().as_str() {
        ".inf" | "+.inf" => Some(f64::INFINITY),
        "-.inf" => Some(f64::NEG_INFINITY),
        ".nan" => Some(f64::NAN),
        _ => None,
    }
}

/// Python `int(s.strip(), 10)`.
fn parse_base10(s: &str) -> Option<i128> {
    let t = s.trim();
    let (neg, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let b = digits.as_bytes();
    if b.is_empty() || !b[0].is_ascii_digit() || !b[b.len() - 1].is_ascii_digit() || digits.contains("__") {
        return None;
    }
    if !b.iter().all(|c| c.is_ascii_digit() || *c == b'_') {
        return None;
    }
    let n: i128 = digits.replace('_', "").parse().ok()?;
    Some(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(yaml: &str) -> CapSetting {
        resolve(&YamlLoader::load_from_str(yaml).expect("yaml")[0])
    }

    #[test]
    fn top_level_wins_even_when_null() {
        assert_eq!(cap("max_concurrent_sessions: 3\ngateway:\n  max_concurrent_sessions: 9").cap, Some(3));
        assert_eq!(cap("max_concurrent_sessions: null\ngateway:\n  max_concurrent_sessions: 9").cap, None);
        assert_eq!(cap("max_concurrent_sessions:\ngateway:\n  max_concurrent_sessions: 9").cap, None);
        let gw = cap("gateway:\n  max_concurrent_sessions: 9");
        assert_eq!((gw.cap, gw.key.as_deref()), (Some(9), Some("gateway.max_concurrent_sessions")));
        assert_eq!(cap("other: 1").cap, None);
        assert_eq!(cap("- a list").cap, None);
    }

    #[test]
    fn coercion_follows_hermes() {
        assert_eq!(cap("max_concurrent_sessions: 0").cap, None);
        assert_eq!(cap("max_concurrent_sessions: -2").cap, None);
        assert_eq!(cap("max_concurrent_sessions: 4.0").cap, Some(4));
        assert_eq!(cap("max_concurrent_sessions: ' 5 '").cap, Some(5));
        assert_eq!(cap("max_concurrent_sessions: '1_0'").cap, Some(10));
        for bad in ["true", "2.5", "'five'", ".inf", "[1]"] {
            let c = cap(&format!("max_concurrent_sessions: {bad}"));
            assert_eq!(c.cap, None, "{bad}");
            assert_eq!(c.warnings.len(), 1, "{bad} must warn");
        }
    }

    #[test]
    fn the_idle_threshold_is_leasectls_own_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.yaml");
        assert_eq!(read_idle_threshold(&path), Ok(None));
        std::fs::write(&path, "max_concurrent_sessions: 3\nleasectl:\n  idle_threshold: 90m\n").expect("write");
        assert_eq!(read_idle_threshold(&path), Ok(Some(std::time::Duration::from_secs(5400))));
        std::fs::write(&path, "leasectl:\n  idle_threshold: 600\n").expect("write");
        assert_eq!(read_idle_threshold(&path), Ok(Some(std::time::Duration::from_secs(600))));
        std::fs::write(&path, "leasectl:\n  idle_threshold: soon\n").expect("write");
        assert!(read_idle_threshold(&path).is_err_and(|e| e.contains("soon")));
    }

    #[test]
    fn missing_and_broken_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_cap(&dir.path().join("config.yaml")), CapSetting::default());
        std::fs::write(dir.path().join("config.yaml"), "a: [unclosed").expect("write");
        let c = read_cap(&dir.path().join("config.yaml"));
        assert_eq!(c.cap, None);
        assert!(c.warnings[0].contains("cannot parse"));
    }
}
