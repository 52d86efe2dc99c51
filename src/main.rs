//! The binary: parse the command line, run it, exit with its code. A panic is reported
//! by color-eyre's hook and exits 101, as under std's own start.

fn main() {
    // color-eyre gives readable reports for the unexpected; expected errors are printed by the CLI.
    let _ = color_eyre::install();
    let code = match leasectl::cli::parse() {
        Ok(cli) => leasectl::cli::run(cli),
        Err(code) => code,
    };
    // `exit` flushes standard output; the CLI has recorded a write that failed.
    std::process::exit(code)
}
