use clap::Parser;

fn main() {
    // color-eyre gives readable reports for the unexpected; expected errors are printed by the CLI.
    let _ = color_eyre::install();
    let cli = leasectl::cli::Cli::parse();
    std::process::exit(leasectl::cli::run(cli));
}
