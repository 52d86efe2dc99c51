//! `leasectl demo`: a sandbox home, real owner processes, and playground actions
//! that show every refusal reason. It plugs into the console as an extension
//! (`console`): its own state and keys (`panel`, `keys`) and view (`view`); the
//! console does not know about it.

pub mod console;
pub mod keys;
pub mod panel;
pub mod playground;
pub mod sandbox;
pub mod tour;
pub mod view;

pub use panel::{DemoState, Field, Form, FormKind};
pub use playground::{Action, CorruptKind, Outcome, OwnerChoice, OwnerView, Playground, Verdict};
pub use sandbox::Sandbox;
