//! The test binaries' own `main`: libtest-mimic running the listed tests, so that a test which
//! finds this machine without what it needs (a sandbox, a docker daemon, an agent CLI, the MCP
//! SDK, a cluster) is reported as **ignored, with the reason**, in the summary. With the
//! built-in harness such a test could only return early and show as passed.
//!
//! A test skips with [`skip`]; under `CORDON_TEST_NO_SKIP` (CI) that is a failure instead.
//! Tests are listed in `common::tests!` at the foot of each file; a test function left out is
//! dead code, which the lints refuse, and a stray `#[test]` (which a `harness = false` binary
//! silently drops) fails the binary's own first check.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::ExitCode;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// The panic payload of a test that skipped.
struct Skipped(String);

/// Stops the calling test as ignored, saying why, unless `CORDON_TEST_NO_SKIP` is set, where
/// it fails instead: in CI a missing feature is a broken machine, not a pass.
pub fn skip(why: impl std::fmt::Display) -> ! {
    if std::env::var_os("CORDON_TEST_NO_SKIP").is_some() {
        panic!("{why} (CORDON_TEST_NO_SKIP is set)");
    }
    std::panic::panic_any(Skipped(why.to_string()))
}

/// Stops the calling test as ignored even under `CORDON_TEST_NO_SKIP`: for a test that needs
/// what only the person running it can give (a cluster), which CI does not have. It still
/// shows as ignored, with the reason, never as passed.
pub fn not_given(why: impl std::fmt::Display) -> ! {
    std::panic::panic_any(Skipped(why.to_string()))
}

fn message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "the test panicked".into())
}

/// One test: its name and what it runs.
pub type Test = (String, Box<dyn FnOnce() + Send>);

/// Test functions by name.
pub fn listed(tests: &[(&str, fn())]) -> Vec<Test> {
    tests
        .iter()
        .map(|&(name, test)| (name.to_string(), Box::new(test) as Box<dyn FnOnce() + Send>))
        .collect()
}

/// Runs `tests` as the binary's tests, with the standard test flags. `source` is the file's
/// own text, checked for `#[test]` attributes that would never run.
pub fn run(source: &str, tests: Vec<Test>) -> ExitCode {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // A skip is not a failure; its reason is printed in the summary line instead.
        if info.payload().downcast_ref::<Skipped>().is_none() {
            default_hook(info);
        }
    }));
    let attribute = concat!("#[", "test]");
    let stray: Vec<String> = source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == attribute)
        .map(|(i, _)| format!("line {}", i + 1))
        .collect();
    let mut trials = vec![Trial::test("every_test_is_listed", move || {
        if stray.is_empty() {
            Ok(())
        } else {
            Err(Failed::from(format!(
                "{attribute} at {}: this binary has its own harness, which never runs those; \
                 drop the attribute and list the function in common::tests!",
                stray.join(", ")
            )))
        }
    })];
    trials.extend(tests.into_iter().map(|(name, test)| {
        Trial::ignorable_test(name, move || match catch_unwind(AssertUnwindSafe(test)) {
            Ok(()) => Ok(Completion::Completed),
            Err(payload) => match payload.downcast::<Skipped>() {
                Ok(skipped) => Ok(Completion::ignored_with(skipped.0)),
                Err(payload) => Err(Failed::from(message(&*payload))),
            },
        })
    }));
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}

/// The binary's `main`: every test function of the file, by name, in the order written.
#[allow(unused_macros)] // container.rs builds its list by hand, once per engine.
macro_rules! tests {
    ($file:literal: $($test:ident),* $(,)?) => {
        fn main() -> std::process::ExitCode {
            common::harness::run(
                include_str!($file),
                common::harness::listed(&[$((stringify!($test), $test as fn())),*]),
            )
        }
    };
}
#[allow(unused_imports)]
pub(crate) use tests;
