//! Finding a lease by the id an operator typed: the whole id, or a unique prefix of at
//! least [`MIN_PREFIX`] characters (as `ls` shows them, like git's short hashes).

use crate::lease::view::LeaseView;

// The shortest prefix (4), and what a refusal adds for a shorter one: said with the error.
pub(crate) use crate::lease::error::{MIN_PREFIX, too_short};

/// What a typed id names in one registry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lookup {
    /// Exactly one lease: its whole id.
    Found(String),
    /// No lease has this id, or starts with it.
    Missing,
    /// Several leases start with it: every one, in stored order.
    Ambiguous(Vec<LeaseView>),
}

/// Look `typed` up among `views`: an exact id wins over prefixes of longer ones.
pub(crate) fn lookup(views: &[LeaseView], typed: &str) -> Lookup {
    if typed.is_empty() {
        return Lookup::Missing;
    }
    if views.iter().any(|v| v.entry.lease_id() == typed) {
        return Lookup::Found(typed.to_owned());
    }
    if typed.chars().count() < MIN_PREFIX {
        return Lookup::Missing;
    }
    let mut matches: Vec<&LeaseView> = views.iter().filter(|v| v.entry.lease_id().starts_with(typed)).collect();
    // The same id twice (an invalid registry's duplicate) is still one lease to name.
    matches.dedup_by(|a, b| a.entry.lease_id() == b.entry.lease_id());
    match matches.as_slice() {
        [] => Lookup::Missing,
        [one] => Lookup::Found(one.entry.lease_id().to_owned()),
        many => Lookup::Ambiguous(many.iter().map(|v| (*v).clone()).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{Entry, Liveness};

    fn view(id: &str) -> LeaseView {
        let value = serde_json::json!({"lease_id": id, "session_id": "S", "pid": 1});
        let entry = Entry::from_value(0, value, &std::collections::HashSet::<String>::new()).expect("an entry");
        LeaseView { entry, liveness: Liveness::Alive, remote: None }
    }

    #[test]
    fn whole_ids_and_unique_prefixes_of_four_or_more_are_found() {
        let views = [view("0f3c9e2a"), view("0f3d1111"), view("abcd")];
        assert_eq!(lookup(&views, "0f3c9e2a"), Lookup::Found("0f3c9e2a".into()));
        assert_eq!(lookup(&views, "0f3c"), Lookup::Found("0f3c9e2a".into()));
        assert_eq!(lookup(&views, "abcd"), Lookup::Found("abcd".into()), "a whole id shorter than a prefix");
        assert_eq!(lookup(&views, "0f3"), Lookup::Missing, "three characters are not a prefix");
        assert!(matches!(lookup(&views, "0f3c9e2a0"), Lookup::Missing));
        assert!(matches!(lookup(&views, ""), Lookup::Missing));
        match lookup(&[view("0f3c9e2a"), view("0f3c1111")], "0f3c") {
            Lookup::Ambiguous(found) => assert_eq!(found.len(), 2),
            other => panic!("{other:?}"),
        }
    }
}
