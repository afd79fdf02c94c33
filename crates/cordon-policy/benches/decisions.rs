//! Decisions per second on a 200-rule policy, with compound shell commands.
//!
//! Run: `cargo bench -p cordon-policy --bench decisions`. Figures go in docs/BENCHMARKS.md.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

use cordon_policy::{ApprovalMode, CheckOptions, NoExternalRunner};

mod common;

fn bench(c: &mut Criterion) {
    let engine = common::engine();
    let opts = CheckOptions {
        mode: ApprovalMode::Default,
        non_interactive: false,
        ..Default::default()
    };
    let mut group = c.benchmark_group("decide_200_rules");
    for (name, call) in &common::cases() {
        group.bench_function(*name, |b| {
            b.iter(|| black_box(engine.check(black_box(call), opts, &NoExternalRunner)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
