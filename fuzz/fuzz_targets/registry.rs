//! Read, validate and write the registry on arbitrary bytes: never panic, and for
//! every file that reads, write(read(x)) keeps every field and is stable; the
//! one-pass reader of Hermes' layout agrees with the general reader.
#![no_main]

use leasectl::lease::{Prober, repair, file::registry as store};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The one-pass reader of Hermes' own layout and the general one agree (a
    // leading space sends the same document the general way).
    if !data.starts_with(b"\xEF\xBB\xBF") {
        let spaced = [b" ", data].concat();
        let verdict = |r: Result<store::RegistryFile, Vec<leasectl::lease::Problem>>| {
            r.map_err(|p| p.iter().map(|p| (p.rule, p.entry_index)).collect::<Vec<_>>())
        };
        assert_eq!(verdict(store::parse(data)), verdict(store::parse(&spaced)), "the two readers disagree");
    }
    if let Ok(file) = store::parse(data) {
        let written = store::serialize(&file);
        let again = store::parse(written.as_bytes()).expect("what we write must read back");
        assert_eq!(again.entries.len(), file.entries.len());
        for (a, b) in again.entries.iter().zip(&file.entries) {
            assert_eq!(a.fields().len(), b.fields().len(), "a field was lost");
            assert_eq!(a.lease_id(), b.lease_id());
        }
        assert_eq!(store::serialize(&again), written, "a second write changed bytes");
    }
    let _ = repair::plan(data, &mut Prober::new());
});
