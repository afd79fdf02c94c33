//! `cordon`: the command line over cordon's application core (`cordon-app`).

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// Exit statuses cordon itself uses. Documented in the README.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// `policy lint` found errors.
    pub const LINT_ERRORS: u8 = 1;
    /// A bad call: unknown flag, malformed JSON, policy files that do not load.
    pub const USAGE: u8 = 2;
}

fn main() -> ExitCode {
    // The sandbox helper is this same binary started with a hidden first argument; it must
    // run before anything else so that it stays single-threaded.
    #[cfg(target_os = "linux")]
    {
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        if args
            .first()
            .is_some_and(|a| a == cordon_sandbox::linux::HELPER_ARG)
        {
            cordon_sandbox::linux::helper_main(&args[1..]);
        }
    }
    let args = cli::Cli::parse();
    args.start_logging();
    #[cfg(target_os = "linux")]
    if args.only_prints() {
        cordon_sandbox::linux::end_quietly_on_closed_output();
    }
    match cli::run(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("cordon: error: {e:#}");
            ExitCode::from(exit::USAGE)
        }
    }
}
