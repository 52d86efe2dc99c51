//! Places by location, with no copy of any location: a hash table of indices into a list
//! its owner keeps (the app's tabs, the worker's stores), each looked up through that
//! list. Maps keyed by a copy of each location were a sixth of a 100,000-profile
//! console's memory.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use crate::lease::Location;

#[derive(Debug, Clone, Default)]
pub(super) struct LocationIndex {
    table: HashTable<usize>,
}

fn hash(location: &Location) -> u64 {
    FxBuildHasher.hash_one(location)
}

impl LocationIndex {
    /// How many places it holds.
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    pub(super) fn clear(&mut self) {
        self.table.clear();
    }

    /// The place of `location`, where `at` gives the location at each place.
    pub(super) fn find<'a>(&self, location: &Location, at: impl Fn(usize) -> Option<&'a Location>) -> Option<usize> {
        self.table.find(hash(location), |&i| at(i) == Some(location)).copied()
    }

    /// Note that `location` is at `place` (`at` must already give it there). A location
    /// noted before keeps its first place.
    pub(super) fn insert<'a>(&mut self, location: &Location, place: usize, at: impl Fn(usize) -> Option<&'a Location>) {
        let h = hash(location);
        if self.table.find(h, |&i| at(i) == Some(location)).is_some() {
            return;
        }
        // On growth each place is hashed again from its location.
        self.table.insert_unique(h, place, |&i| at(i).map_or(0, hash));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::Registry;

    #[test]
    fn finds_each_place_by_its_location_and_nothing_else() {
        let list: Vec<Location> =
            (0..1000).map(|i| Location::File(Registry::new(format!("p{i}"), format!("/h/profiles/p{i}")))).collect();
        let mut index = LocationIndex::default();
        for (i, l) in list.iter().enumerate() {
            index.insert(l, i, |p| list.get(p));
        }
        assert_eq!(index.len(), 1000);
        for (i, l) in list.iter().enumerate() {
            assert_eq!(index.find(l, |p| list.get(p)), Some(i));
        }
        // A second note of the same location keeps the first place.
        index.insert(&list[3], 7, |p| list.get(p));
        assert_eq!((index.find(&list[3], |p| list.get(p)), index.len()), (Some(3), 1000));
        let absent = Location::File(Registry::new("p1000", "/h/profiles/p1000"));
        assert_eq!(index.find(&absent, |p| list.get(p)), None);
        index.clear();
        assert_eq!((index.len(), index.find(&list[0], |p| list.get(p))), (0, None));
    }
}
