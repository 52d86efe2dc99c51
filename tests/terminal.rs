//! Tests of the console and the demo in a real pseudo-terminal.
//! One test binary per kind of need (each links once): every file here is a module.

mod common;

mod console_pty;
mod console_stress_pty;
mod demo_pty;
mod demo_walk;
mod ssh_console_pty;
