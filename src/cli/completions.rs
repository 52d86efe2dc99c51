//! `completions`: generated from the argument definitions.

use super::EXIT_OK;
use super::args::Cli;
use super::messages::note_stdout;

pub(super) fn print_completions(shell: clap_complete::Shell) -> i32 {
    use clap::CommandFactory as _;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "leasectl", &mut out);
    use std::io::Write as _;
    note_stdout(std::io::stdout().write_all(&out));
    EXIT_OK
}
