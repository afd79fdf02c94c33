//! `cordon`: every command (`cordon_cli`).

fn main() -> std::process::ExitCode {
    cordon_cli::main()
}
