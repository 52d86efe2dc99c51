//! `leasectl demo`: a sandbox home, real owner processes, and playground actions
//! that show every refusal reason. No terminal code: the console drives it.

pub mod playground;
pub mod sandbox;
pub mod tour;

pub use playground::{Action, CorruptKind, Outcome, OwnerChoice, OwnerView, Playground, Verdict};
pub use sandbox::Sandbox;
