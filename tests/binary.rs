//! Tests of the built binary as an operator and a script run it: real processes, real files, real flock.
//! One test binary per kind of need (each links once): every file here is a module.

mod common;

mod advice;
mod audit;
mod cli;
mod cli_operators;
mod completions;
mod containers;
mod demo_tour;
mod docs;
mod events;
mod fleet;
mod hardening;
mod hermes_releases;
mod hermes_rules;
mod hints;
mod home_faults;
mod hostile_home;
mod metrics;
mod morning;
mod operator_pace;
mod owner_kinds;
mod repair;
mod run_work;
mod serve_stdio;
mod session_context;
mod ssh_hosts;
mod ssh_install;
mod stop_owner;
mod stress;
mod untruths;
