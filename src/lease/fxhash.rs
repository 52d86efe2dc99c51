//! A small, fast hasher for the registry's own keys (lease ids, pids): FxHash's
//! mixing. Collisions only cost time, and whoever can write the registry can
//! already refuse every acquire.

#[derive(Default)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`FxHasher`]s for `HashMap`/`HashSet`.
pub type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

/// The Fx hash of a string (for sets of hashes standing in for sets of ids).
pub fn hash_str(s: &str) -> u64 {
    use std::hash::BuildHasher;
    FxBuild::default().hash_one(s)
}
