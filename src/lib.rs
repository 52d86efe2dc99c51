//! leasectl: the operator's tool for Hermes Agent's active-session registry.

// unsafe only where a system call has no safe wrapper: each such function allows it and
// says why (SAFETY).
#![deny(unsafe_code)]

pub mod cli;
pub mod demo;
pub mod lease;
pub mod supervise;
pub mod tui;
