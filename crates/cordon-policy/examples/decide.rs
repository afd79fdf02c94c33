//! Decides one benchmark call many times: a steady workload for instruction counting, which,
//! unlike wall-clock time, does not move with the load on a shared virtual machine.
//!
//! `valgrind --tool=callgrind target/release/examples/decide wrapped 1000`
//! (see docs/BENCHMARKS.md for how the per-decision count is derived).

use cordon_policy::{ApprovalMode, CheckOptions, NoExternalRunner};

#[path = "../benches/common/mod.rs"]
mod common;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "simple".into());
    let times: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let engine = common::engine();
    let cases = common::cases();
    let Some((_, call)) = cases.iter().find(|(n, _)| *n == name) else {
        let names: Vec<_> = cases.iter().map(|(n, _)| *n).collect();
        eprintln!("unknown case `{name}`; cases: {}", names.join(", "));
        std::process::exit(2);
    };
    let opts = CheckOptions {
        mode: ApprovalMode::Default,
        non_interactive: false,
        ..Default::default()
    };
    for _ in 0..times {
        std::hint::black_box(engine.check(std::hint::black_box(call), opts, &NoExternalRunner));
    }
}
