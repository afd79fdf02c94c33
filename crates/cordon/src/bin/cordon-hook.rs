//! `cordon-hook`: `cordon hook` as a program of its own, which starts faster for linking
//! nothing else (`cordon_cli`). `cordon setup` names it in the agents' settings when it is
//! installed beside `cordon`.

#[cfg(unix)]
fn main() -> std::process::ExitCode {
    cordon_cli::hook_main()
}

#[cfg(not(unix))]
fn main() {
    eprintln!("cordon-hook: the agents' hooks are supported on Linux and macOS only");
    std::process::exit(2);
}
