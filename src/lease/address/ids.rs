//! Fresh identifiers: lease ids as Hermes makes them, and random numbers, from the
//! kernel through `uuid` and `getrandom`.

/// A uuid4 as 32 lowercase hex digits, as Python's `uuid.uuid4().hex`.
pub fn lease_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// True for a whole lease id as Hermes makes them: 32 lowercase hex digits (uuid4().hex).
pub fn is_lease_id(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A random u64 from the kernel.
pub fn random_u64() -> Result<u64, getrandom::Error> {
    getrandom::u64()
}

#[cfg(test)]
mod tests {
    #[test]
    fn lease_ids_are_uuid4_hex() {
        let a = super::lease_id();
        let b = super::lease_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(&a[12..13], "4");
        assert!(matches!(&a[16..17], "8" | "9" | "a" | "b"));
    }
}
