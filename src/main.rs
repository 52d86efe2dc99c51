fn main() {
    // color-eyre gives readable reports for the unexpected; expected errors are printed by the CLI.
    let _ = color_eyre::install();
    match leasectl::cli::parse() {
        Ok(cli) => std::process::exit(leasectl::cli::run(cli)),
        Err(code) => std::process::exit(code),
    }
}
