//! leasectl: the operator's tool for Hermes Agent's active-session registry.

// A function that does several things is split (threshold in clippy.toml).
#![warn(clippy::too_many_lines)]
// What is `pub` is reachable from outside the crate: an item only the crate uses says so,
// and dead code shows.
#![warn(unreachable_pub)]

pub mod cli;
pub mod demo;
pub mod lease;
pub mod serve;
pub mod supervise;
pub mod tui;
