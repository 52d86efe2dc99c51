//! The worker's stores, one per location in tab order. A registry file with nothing to
//! remember (no file, no cap set, nothing wrong) is kept as its location alone, and a
//! store is made for it again when it is read or acted on: a console over 100,000 empty
//! profiles kept a store for each (176 bytes and three allocations).

use std::sync::Arc;

use super::writes::Writes;
use crate::lease::audited::{Audited, Auditor};
use crate::lease::home::config::CapSetting;
use crate::lease::owners::liveness::Prober;
use crate::lease::{self, LeaseStore, Listing, Location, StoreOptions};

enum Slot {
    Open(Box<dyn LeaseStore>),
    /// A registry file that did not exist at its last reading, with no cap set.
    Empty(Location),
}

impl Slot {
    fn location(&self) -> &Location {
        match self {
            Slot::Open(store) => store.location(),
            Slot::Empty(location) => location,
        }
    }
}

pub(super) struct Stores {
    slots: Vec<Slot>,
    options: StoreOptions,
    /// Every change the console makes is on record, as the CLI's are: each store made is
    /// wrapped with it.
    auditor: Arc<Auditor>,
}

/// What a store of `location` says after reading a registry file that is not there.
fn nothing_there(location: &Location) -> Listing {
    Listing {
        location: location.clone(),
        exists: false,
        modified: None,
        cap: CapSetting::default(),
        leases: Ok(Vec::new()),
        remote: None,
    }
}

/// Whether a store that read `listing` has nothing a new store would not know.
fn nothing_to_keep(listing: &Listing) -> bool {
    let empty = nothing_there(&listing.location);
    matches!(listing.location, Location::File(_))
        && listing.exists == empty.exists
        && listing.modified.is_none()
        && listing.cap == empty.cap
        && listing.leases.as_ref().is_ok_and(Vec::is_empty)
        && listing.remote.is_none()
}

impl Stores {
    pub(super) fn new(options: StoreOptions, auditor: Arc<Auditor>) -> Stores {
        Stores { slots: Vec::new(), options, auditor }
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub(super) fn location(&self, index: usize) -> Option<&Location> {
        self.slots.get(index).map(Slot::location)
    }

    pub(super) fn locations(&self) -> impl Iterator<Item = &Location> {
        self.slots.iter().map(Slot::location)
    }

    /// Add `store` after the others.
    pub(super) fn push(&mut self, store: Box<dyn LeaseStore>) {
        self.slots.push(Slot::Open(Audited::wrap(store, Arc::clone(&self.auditor))));
    }

    /// How many stores are kept open (the others are registries with nothing in them).
    #[cfg(test)]
    pub(super) fn open_count(&self) -> usize {
        self.slots.iter().filter(|s| matches!(s, Slot::Open(_))).count()
    }

    /// The store at `index`, made again if it was let go.
    pub(super) fn store(&mut self, index: usize) -> Option<&mut dyn LeaseStore> {
        let slot = self.slots.get_mut(index)?;
        if let Slot::Empty(location) = slot {
            let store = lease::open(location, self.options).ok()?;
            *slot = Slot::Open(Audited::wrap(store, Arc::clone(&self.auditor)));
        }
        match slot {
            Slot::Open(store) => Some(store.as_mut()),
            Slot::Empty(_) => None,
        }
    }

    /// Read the store at `index`, one of them (see [`Writes::read`]); one that found
    /// nothing is let go.
    pub(super) fn read(&mut self, index: usize, writes: &mut Writes) -> (Listing, Vec<String>) {
        let Some(store) = self.store(index) else {
            // Never for a registry file (its store is made from its location alone).
            return (nothing_there(self.slots[index].location()), Vec::new());
        };
        let (listing, pruned) = writes.read(index, store);
        if nothing_to_keep(&listing) {
            self.slots[index] = Slot::Empty(listing.location.clone());
        }
        (listing, pruned)
    }

    /// The store at `index`, one of them, judged again without reading (see
    /// [`LeaseStore::rejudge`]).
    pub(super) fn rejudge(&mut self, index: usize, prober: &mut Prober) -> Listing {
        match &mut self.slots[index] {
            Slot::Open(store) => store.rejudge(prober),
            Slot::Empty(location) => nothing_there(location),
        }
    }

    /// Whether judging the store at `index` again could say anything new.
    pub(super) fn rejudge_needed(&mut self, index: usize, prober: &mut Prober) -> bool {
        match self.slots.get_mut(index) {
            Some(Slot::Open(store)) => store.rejudge_needed(prober),
            Some(Slot::Empty(_)) | None => false,
        }
    }

    /// The open store at `index`, without making one (a store let go has nothing to say).
    pub(super) fn open(&self, index: usize) -> Option<&dyn LeaseStore> {
        match self.slots.get(index)? {
            Slot::Open(store) => Some(store.as_ref()),
            Slot::Empty(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{AcquireRequest, Registry};

    fn stores() -> Stores {
        let auditor = Auditor::new(crate::lease::home::audit::Actor::console(), Box::new(|_| {}));
        Stores::new(StoreOptions::default(), auditor)
    }

    /// A registry with nothing in it is kept as its location and reads as a store would;
    /// one with a lease, or a cap set, keeps its store; gone again, it is let go.
    #[test]
    fn an_empty_registry_is_kept_as_its_location_and_reads_as_a_store_would() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = Registry::new("root", dir.path());
        let location = Location::File(reg.clone());
        let mut all = stores();
        all.push(lease::open(&location, StoreOptions::default()).expect("a store"));
        let mut writes = Writes::default();

        let (read, _) = all.read(0, &mut writes);
        assert_eq!(all.open_count(), 0, "nothing there: let go");
        assert_eq!(all.location(0), Some(&location));
        let again = all.rejudge(0, &mut Prober::new());
        let fresh = lease::open(&location, StoreOptions::default()).expect("a store").read();
        for listing in [&read, &again] {
            assert_eq!(listing.location, fresh.location);
            assert_eq!((listing.exists, listing.modified), (fresh.exists, fresh.modified));
            assert_eq!(listing.cap, fresh.cap);
            assert_eq!(listing.leases.as_ref().map(Vec::len).ok(), Some(0));
        }
        assert!(!all.rejudge_needed(0, &mut Prober::new()));

        let req = AcquireRequest::for_this_process("S");
        all.store(0).expect("made again").acquire(&req).expect("granted");
        let (read, _) = all.read(0, &mut writes);
        assert_eq!(read.leases.as_ref().map(Vec::len).ok(), Some(1));
        assert_eq!(all.open_count(), 1, "a lease: kept");

        std::fs::remove_dir_all(reg.runtime_dir()).expect("remove runtime/");
        std::fs::write(reg.config_path(), "max_concurrent_sessions: 3\n").expect("config.yaml");
        let (read, _) = all.read(0, &mut writes);
        assert_eq!(read.cap.cap, Some(3));
        assert_eq!(all.open_count(), 1, "a cap set: kept");

        std::fs::remove_file(reg.config_path()).expect("remove config.yaml");
        all.read(0, &mut writes);
        assert_eq!(all.open_count(), 0, "nothing there again: let go");
    }
}
