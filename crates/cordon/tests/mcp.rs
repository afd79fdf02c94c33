//! `cordon mcp` driven by a client cordon did not write: the official MCP Python SDK (the `mcp`
//! package from PyPI) runs tests/mcp/drive.py against the real binary. It lists the tools,
//! calls each, sees output stream as progress, cancels a long run and checks nothing is left,
//! and answers elicitations yes, no, and not at all.
//!
//! The Python with `mcp` installed comes from `CORDON_MCP_PYTHON` (.ci/run makes a venv and
//! sets it); without it the test skips, saying so, unless `CORDON_TEST_NO_SKIP` is set.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{Sandbox, cordon_bin, stderr, stdout};

fn python() -> Option<PathBuf> {
    let found = std::env::var_os("CORDON_MCP_PYTHON").map(PathBuf::from);
    if found.is_none() {
        let why = "mcp client test skipped: CORDON_MCP_PYTHON is not set (a python with the `mcp` \
                   package, e.g. `python3 -m venv /var/tmp/cordon-mcp-venv && \
                   /var/tmp/cordon-mcp-venv/bin/pip install mcp`; .ci/run does this)";
        assert!(
            std::env::var_os("CORDON_TEST_NO_SKIP").is_none(),
            "{why} (CORDON_TEST_NO_SKIP is set)"
        );
        eprintln!("{why}");
    }
    found
}

#[test]
fn a_real_mcp_client_lists_calls_streams_cancels_and_is_asked() {
    let Some(python) = python() else { return };
    let Some(sb) = Sandbox::new() else { return };
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/drive.py");
    std::fs::write(sb.outside.join("secret"), "not for the agent").expect("write");
    let out = Command::new(&python)
        .arg(&driver)
        .arg(cordon_bin())
        .arg(&sb.ws)
        .arg(&sb.outside)
        // What the cancelled command sleeps, so the driver can look for what survived.
        .arg("987654")
        .current_dir(&sb.ws)
        // No user or workspace settings of the machine running the tests.
        .env("XDG_CONFIG_HOME", sb.outside.join("config"))
        .output()
        .expect("start the MCP client driver");
    println!("{}", stdout(&out));
    assert!(
        out.status.success(),
        "the MCP client's exchange with cordon mcp failed ({}):\n{}\n{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("all checks passed"));
}
