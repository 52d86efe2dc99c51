//! leasectl: the operator's tool for Hermes Agent's active-session registry.

pub mod cli;
pub mod demo;
pub mod lease;
pub mod supervise;
pub mod tui;
