//! A process that does only what `cordon hook claude-code` does, with the built-in defaults:
//! read the agent's input, decide, print the answer. It exists to measure what a hook call
//! would cost from a binary that links nothing else (docs/BENCHMARKS.md, "A hook call"):
//! `cordon`'s own start-up grows with everything else it carries.
//!
//! `target/dist/examples/hook_only < input.json` decides; with `--floor` it only reads its
//! input, which times the same binary's start-up without the decision; with `--time` it also
//! says on standard error how long the decision took inside the process.

use std::io::Read;

use cordon_app::agents::{self, Agent, HookOptions, MAX_HOOK_INPUT};

fn main() -> anyhow::Result<()> {
    let mut input = Vec::new();
    // Read as `cordon hook` reads, so that both do the same work.
    std::io::stdin()
        .lock()
        .take(MAX_HOOK_INPUT + 1)
        .read_to_end(&mut input)?;
    anyhow::ensure!(
        input.len() as u64 <= MAX_HOOK_INPUT,
        "the hook input is longer than {MAX_HOOK_INPUT} bytes"
    );
    let flag = std::env::args().nth(1);
    if flag.as_deref() == Some("--floor") {
        return Ok(());
    }
    let opts = HookOptions::default();
    let start = std::time::Instant::now();
    let answer = agents::decide(Agent::ClaudeCode, &input, Default::default(), &opts)?;
    if flag.as_deref() == Some("--time") {
        eprintln!(
            "decided in {:?}, reading the policy and settings included",
            start.elapsed()
        );
    }
    println!("{answer}");
    Ok(())
}
