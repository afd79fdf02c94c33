//! cordon's command line over its application core (`cordon-app`), as a library of its two
//! programs: `cordon`, every command, and `cordon-hook`, which is `cordon hook` alone. An
//! agent starts its hook on every tool call, and a program that links only the policy and the
//! agents' formats starts in less time than one that carries the sandbox, the Kubernetes
//! client and the MCP server too (docs/BENCHMARKS.md).

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

/// `cordon`.
pub fn main() -> ExitCode {
    // The sandbox helper and cordon's own children (a run of `exec`, a run's proxy) are this
    // same binary started again, with a typed request; they must take over before anything
    // else, while the process is one thread.
    #[cfg(unix)]
    cordon_app::child::run_if_child(cli::start_child_logging);
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

/// `cordon-hook`: `cordon hook`, taking the same arguments after the agent's name.
#[cfg(unix)]
pub fn hook_main() -> ExitCode {
    cli::hook_main()
}
