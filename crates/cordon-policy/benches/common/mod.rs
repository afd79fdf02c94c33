//! The 200-rule policy and the calls the decision benchmarks use, shared by the criterion
//! bench (`benches/decisions.rs`) and the instruction-count driver (`examples/decide.rs`).

use cordon_policy::load::parse_policy_text;
use cordon_policy::{Environment, PolicyEngine, PolicySources, Tier, ToolCall, load};
use serde_json::json;

/// 200 rules of the kinds people write: command prefixes, regexes, denies, other tools'
/// argument patterns, MCP servers.
pub fn policy_200() -> String {
    let tools = [
        "cargo", "npm", "git", "make", "docker", "kubectl", "python", "go", "pytest", "node",
    ];
    let subs = [
        "build", "test", "run", "fmt", "lint", "check", "install", "status", "log", "diff",
    ];
    let mut text = String::new();
    let mut n = 0;
    for (i, t) in tools.iter().enumerate() {
        for (j, s) in subs.iter().enumerate() {
            let decision = if (i + j) % 7 == 0 { "deny" } else { "allow" };
            text.push_str(&format!(
                "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"{t} {s}\"\ndecision = \"{decision}\"\npriority = {}\n\n",
                100 + n
            ));
            n += 1;
        }
    }
    for i in 0..50 {
        text.push_str(&format!(
            "[[rule]]\ntoolName = \"run_shell_command\"\ncommandRegex = 'tool{i} (--flag{i}|-x) .*'\ndecision = \"allow\"\npriority = {}\n\n",
            300 + i
        ));
    }
    for i in 0..30 {
        text.push_str(&format!(
            "[[rule]]\ntoolName = [\"write_file\", \"replace\"]\nargsPattern = '\\x00\"file_path\":\"src/module{i}/[^\"]*\\.rs\"\\x00'\ndecision = \"allow\"\npriority = {}\n\n",
            400 + i
        ));
    }
    for i in 0..20 {
        text.push_str(&format!(
            "[[rule]]\ntoolName = \"mcp_server{i}_*\"\nmcpName = \"server{i}\"\ndecision = \"ask_user\"\npriority = {}\n\n",
            500 + i
        ));
    }
    text
}

pub fn engine() -> PolicyEngine {
    let mut set = load(&PolicySources {
        builtin: true,
        ..Default::default()
    });
    let parsed = parse_policy_text(&policy_200(), None, "user:bench.toml", Tier::User);
    assert!(parsed.issues.is_empty(), "{:?}", parsed.issues);
    assert_eq!(parsed.rules.len(), 200);
    set.rules.extend(parsed.rules);
    PolicyEngine::new(set, Environment::default()).expect("bench policy loads")
}

pub fn shell(cmd: &str) -> ToolCall {
    ToolCall::new(
        "run_shell_command",
        json!({ "command": cmd, "description": "bench" }),
    )
}

/// The benchmarked calls, by name.
pub fn cases() -> Vec<(&'static str, ToolCall)> {
    vec![
        ("simple", shell("ls -la")),
        (
            "compound_3",
            shell("git status && cargo test --workspace 2>&1 | tail -n 20"),
        ),
        (
            "compound_loop",
            shell("for f in src/*.rs; do grep -n TODO \"$f\"; done && make lint"),
        ),
        (
            "substitution",
            shell("echo $(git rev-parse HEAD) | tee version.txt; npm run build"),
        ),
        (
            "wrapped",
            shell("timeout 60 bash -c 'cargo build && cargo test' || sudo rm -rf target"),
        ),
        (
            "file_tool",
            ToolCall::new(
                "write_file",
                json!({ "file_path": "src/module7/lib.rs", "content": "x" }),
            ),
        ),
    ]
}
