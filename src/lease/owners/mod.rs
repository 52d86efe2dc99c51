//! Owner processes: who is alive (`liveness`, with start times as psutil reads them in
//! `proc_stat`), owners in other pid namespaces (`namespaces`), pidfds to re-check them
//! (`pidfds`), ending one race-free (`ending`), what they are (`owner`), and what kind of
//! Hermes process each is, with the safe way to free its lease (`kind`).

pub(crate) mod ending;
pub mod kind;
pub mod liveness;
pub mod namespaces;
pub mod owner;
pub(crate) mod pidfds;
pub(crate) mod proc_stat;

/// Each pid of `pids` once, in order: 50,000 leases usually have a few owners. Inserted
/// one by one, as `BTreeSet`'s `collect` would first gather every pid in a list to sort
/// (800 KB at that size: more than a whole prune holds beyond a listing).
pub fn distinct_pids(pids: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut distinct = std::collections::BTreeSet::new();
    distinct.extend(pids);
    distinct.into_iter().collect()
}
