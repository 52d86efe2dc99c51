//! `completions` and `man`: generated from the argument definitions.

use super::args::Cli;
use super::messages::note_stdout;
use super::{EXIT_OK, Failure, fail};

pub(super) fn print_completions(shell: clap_complete::Shell) -> i32 {
    use clap::CommandFactory as _;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "leasectl", &mut out);
    use std::io::Write as _;
    note_stdout(std::io::stdout().write_all(&out));
    EXIT_OK
}

pub(super) fn print_man() -> Result<i32, Failure> {
    use clap::CommandFactory as _;
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(|e| fail(format!("cannot render the manual: {e}")))?;
    use std::io::Write as _;
    note_stdout(std::io::stdout().write_all(&out));
    Ok(EXIT_OK)
}
