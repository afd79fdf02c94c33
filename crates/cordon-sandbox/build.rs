//! Builds the shared object a warm sandbox loads into the bash it starts ahead of each command
//! (`preload/bash_preload.rs`; why, in `src/linux/prestart.rs`). It is its own `no_std`
//! library, built by the same `rustc` for the same target, and embedded in cordon: nothing is
//! installed beside the binary.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=preload/bash_preload.rs");
    println!("cargo:rustc-check-cfg=cfg(cordon_bash_preload)");
    // Rust makes no shared object for a static C library (musl's, which only `cordon-hook`
    // ships with, and it keeps no warm sandbox); without one, each warm command starts its
    // bash when it comes.
    let os = std::env::var("CARGO_CFG_TARGET_OS");
    let c_library = std::env::var("CARGO_CFG_TARGET_ENV");
    if os.as_deref() != Ok("linux") || c_library.as_deref() != Ok("gnu") {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("bash_preload.so");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let mut build = Command::new(rustc);
    build
        .args(["--edition", "2024", "--crate-type", "cdylib"])
        .args(["--crate-name", "cordon_bash_preload"])
        .args([
            "-C",
            "panic=abort",
            "-C",
            "opt-level=2",
            "-C",
            "strip=symbols",
        ])
        .args(["--target", &target, "-o"])
        .arg(&out)
        .arg("preload/bash_preload.rs");
    // A linker configured for the target (cargo passes it on) links this too.
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        let mut arg = std::ffi::OsString::from("linker=");
        arg.push(linker);
        build.arg("-C").arg(arg);
    }
    let done = build.output().unwrap_or_else(|e| {
        panic!("cordon-sandbox: could not run rustc to build preload/bash_preload.rs: {e}")
    });
    if !done.status.success() {
        panic!(
            "cordon-sandbox: building preload/bash_preload.rs failed:\n{}",
            String::from_utf8_lossy(&done.stderr)
        );
    }
    println!("cargo:rustc-cfg=cordon_bash_preload");
}
