//! Hostile and malformed input never panics or hangs the analysis: whatever it is, the engine
//! returns a decision, and never `allow` for what it could not read.

use cordon_policy::{
    CheckOptions, Decision, Environment, NoExternalRunner, PolicyEngine, PolicySources, ToolCall,
    load,
};

/// A small deterministic generator, so a failure can be reproduced from its seed.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const PIECES: &[&str] = &[
    "echo", "rm", "-rf", "/", " ", " ", ";", "&&", "||", "|", "&", "$(", ")", "`", "'", "\"", "\\",
    "${", "}", "{", "(", "<(", ">(", ">", ">>", "<", "<<", "EOF", "\n", "$", "x", "=", "[[", "]]",
    "((", "))", "if", "then", "fi", "for", "do", "done", "case", "in", "esac", "bash", "-c", "*",
    "?", "[", "]", "~", "!", "#", "@P", "$'\\x", "\t", "function", "coproc", "%", ",", "..",
];

#[test]
fn random_scripts_never_panic_and_are_never_allowed_when_unreadable() {
    let engine = PolicyEngine::new(
        load(&PolicySources {
            builtin: true,
            ..Default::default()
        }),
        Environment::default(),
    )
    .expect("built-in policies load");
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for i in 0..5_000 {
        let len = (rng.next() % 24) as usize;
        let script: String = (0..len)
            .map(|_| PIECES[(rng.next() % PIECES.len() as u64) as usize])
            .collect();
        let analysis = cordon_policy::shell::analyse(&script);
        let call = ToolCall::new(
            "run_shell_command",
            serde_json::json!({ "command": script }),
        );
        let outcome = engine.check(
            &call,
            CheckOptions {
                mode: cordon_policy::ApprovalMode::Yolo,
                ..Default::default()
            },
            &NoExternalRunner,
        );
        if !analysis.is_analysable() {
            assert_ne!(
                outcome.decision,
                Decision::Allow,
                "case {i}: {script:?} could not be analysed but was allowed"
            );
        }
    }
}

#[test]
fn deep_nesting_and_huge_input_are_refused_not_recursed() {
    let deep = "echo $(".repeat(200) + &")".repeat(200);
    assert!(!cordon_policy::shell::analyse(&deep).is_analysable());
    let mut nested = String::from("ls");
    for _ in 0..14 {
        nested = format!("bash -c {}", shlex_quote(&nested));
    }
    assert!(!cordon_policy::shell::analyse(&nested).is_analysable());
    let huge = "echo a; ".repeat(20_000);
    assert!(!cordon_policy::shell::analyse(&huge).is_analysable());
}

fn shlex_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
