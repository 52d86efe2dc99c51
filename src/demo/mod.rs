//! `leasectl demo`: a sandbox home, real owner processes, and playground actions
//! that show every refusal reason. It plugs into the console as an extension
//! (`console`): its state (`state`), keys (`panel`, `keys`) and view (`view`); the
//! console does not know about it.

pub(crate) mod console;
pub(crate) mod keys;
pub(crate) mod panel;
pub(crate) mod playground;
pub(crate) mod sandbox;
pub mod state;
pub mod tour;
pub(crate) mod view;

pub use playground::{Action, CorruptKind, Outcome, OwnerChoice, OwnerView, Playground, Verdict};
pub use sandbox::Sandbox;
pub use state::{DemoState, Field, Form, FormKind};
