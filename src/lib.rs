//! leasectl: the operator's tool for Hermes Agent's active-session registry.

// A function that does several things is split (threshold in clippy.toml).
#![warn(clippy::too_many_lines)]

pub mod cli;
pub mod demo;
pub mod lease;
pub mod supervise;
pub mod tui;
