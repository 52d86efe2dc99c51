//! Read, validate and write the registry on arbitrary bytes: never panic, and for
//! every file that reads, write(read(x)) keeps every field and is stable.
#![no_main]

use leasectl::lease::{Prober, repair, store};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
