//! The search for git metadata in a project's tree, which every run makes before and after its
//! command: a whole walk, and a search from a kept one when nothing changed (what most runs
//! do: a `stat` of each directory).
//!
//! Run: `cargo bench -p cordon-app --bench gitsearch`. Figures go in docs/BENCHMARKS.md.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::{Path, PathBuf};

use cordon_sandbox::gitmeta;

/// A git repository with `dirs` directories two deep under `src/`, eight files in each: the
/// tree of scripts/benchtree.py, about the size of cordon's own checkout with its build.
fn tree(root: &Path, dirs: usize) {
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "git {args:?} in {}", root.display());
    };
    git(&["init", "-q", "."]);
    let width = (dirs as f64).sqrt().ceil() as usize;
    for n in 0..dirs {
        let d = root.join(format!("src/m{}/p{}", n / width, n % width));
        std::fs::create_dir_all(&d).expect("mkdir");
        for k in 0..8 {
            std::fs::write(d.join(format!("f{k}.txt")), "x\n").expect("write");
        }
    }
}

fn bench(c: &mut Criterion) {
    let ws = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(ws.path()).expect("canonicalize");
    tree(&root, 3000);
    let roots: Vec<PathBuf> = vec![root];
    let limit = gitmeta::DEFAULT_SCAN_LIMIT;
    let mut group = c.benchmark_group("git_search_3000_dirs");
    group.bench_function("walk", |b| {
        b.iter(|| black_box(gitmeta::scan(black_box(&roots), limit)))
    });
    let kept = gitmeta::scan(&roots, limit);
    group.bench_function("from_kept_unchanged", |b| {
        b.iter(|| black_box(gitmeta::rescan(black_box(&kept), &roots, limit)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
