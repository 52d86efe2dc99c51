//! leasectl: the operator's tool for Hermes Agent's active-session registry.
//!
//! The binary is the product; this library is its code. What is `pub` is the surface the
//! integration tests, the benchmarks and a future Python binding use: the core
//! ([`lease`]: `open` a store for a location, the [`lease::LeaseStore`] interface and
//! the types it speaks, the registry format and owners' liveness), the console's state,
//! update and view ([`tui`]), the demo's tour ([`demo`]), and the command line's entry
//! ([`cli::parse`], [`cli::run`]). Everything else is `pub(crate)`: internal, free to
//! change. ARCHITECTURE.md is the map.

// A function that does several things is split (threshold in clippy.toml).
#![warn(clippy::too_many_lines)]
// What is `pub` is reachable from outside the crate: an item only the crate uses says so,
// and dead code shows.
#![warn(unreachable_pub)]

pub mod cli;
pub mod demo;
pub mod lease;
pub(crate) mod serve;
pub(crate) mod supervise;
pub mod tui;
