//! `leasectl demo`: a sandbox home, real owner processes, and playground actions
//! that show every refusal reason. It plugs into the console as an extension
//! (`console`): its state (`state`), keys (`panel`, `keys`) and view (`view`); the
//! console does not know about it.

pub mod console;
pub mod keys;
pub mod panel;
pub mod playground;
pub mod sandbox;
pub mod state;
pub mod tour;
pub mod view;

pub use playground::{Action, CorruptKind, Outcome, OwnerChoice, OwnerView, Playground, Verdict};
pub use sandbox::Sandbox;
pub use state::{DemoState, Field, Form, FormKind};
