//! Tests of the library in-process: the core and its properties, round trips against python3, the console's update, view and worker, the demo's screens, the one-door rule, the core's layering and the memory a read holds.
//! One test binary per kind of need (each links once): every file here is a module.

mod common;

mod core;
mod demo_snapshots;
mod layering;
mod memory;
mod one_door;
mod roundtrip;
mod seed_exclusivity;
mod tui_snapshots;
mod tui_update;
mod worker;
