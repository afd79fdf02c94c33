//! The agent's own shell tool, run in cordon's sandbox: the hook answers an allowed command
//! with the same command rewritten to run under `cordon run`, which the agent then runs with
//! its own shell. The agent keeps its tool (its output, its time limit, its background runs);
//! cordon confines what the command does.
//!
//! The rewritten line is read twice: first by the agent's shell (bash or zsh for Claude Code,
//! bash for Gemini CLI, the user's shell elsewhere), which must hand `cordon run -c` exactly
//! the command that was decided; then by the bash `cordon run -c` starts, the grammar the
//! command was decided with. [`quote`] is built so the first reading is the same in every
//! shell an agent may use.

use std::path::Path;

/// How a rewritten command is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Containment {
    /// With the project's settings: what the policy allowed, or a person approved.
    Settings,
    /// A question nobody will answer, contained instead: the working directory writable and
    /// nothing else, no network, and no weaker fallback where the full sandbox cannot be built.
    Contained,
}

/// `command` as a command line that runs it under `cordon` (its absolute path) in the
/// sandbox. `None` where no shell can be handed it: a NUL byte ends a C string, so what ran
/// would be less than what was decided.
pub fn rewrite(cordon: &Path, command: &str, how: Containment) -> Option<String> {
    if command.contains('\0') {
        return None;
    }
    let cordon = cordon.to_str()?;
    if cordon.contains('\0') {
        return None;
    }
    // Questions about hosts would break into the agent's interface: a host the settings do
    // not allow is refused and reported instead.
    let flags = match how {
        Containment::Settings => "run --ask-domains deny",
        Containment::Contained => {
            "run --profile contained --fail-if-unavailable --ask-domains deny"
        }
    };
    Some(format!("{} {flags} -c {}", quote(cordon), quote(command)))
}

/// `text` as one word that bash, dash, zsh (with or without `RC_QUOTES`) and fish all read
/// back as `text`. Single quotes hold everything but `'` and `\`: fish reads `\\` and `\'`
/// inside single quotes as escapes where the others do not, so those two go outside, escaped
/// with a backslash, which all of them read the same. No two quotes are ever adjacent inside
/// a quoted run, so zsh's `''` never comes into play.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    let mut open = false;
    for c in text.chars() {
        if c == '\'' || c == '\\' {
            if open {
                out.push('\'');
                open = false;
            }
            out.push('\\');
            out.push(c);
        } else {
            if !open {
                out.push('\'');
                open = true;
            }
            out.push(c);
        }
    }
    if open {
        out.push('\'');
    }
    if out.is_empty() {
        out.push_str("''");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Strings a model could write, with every character the shells read differently.
    fn corpus() -> Vec<String> {
        let mut all: Vec<String> = [
            "",
            "ls -la",
            "echo 'a b' \"c d\"",
            "it's",
            "''",
            "'",
            "\\",
            "\\\\'\\'",
            "a\\'b",
            "echo $HOME `id` $(id) ${x:-y} $'\\n'",
            "x\ny\n",
            "!! !$ ^a^b",
            "~ ~root *.rs ? [ab] {a,b}",
            "a;b|c&d>e<f",
            "\t tab and space \r",
            "ünïcødé ✓ 日本",
            "%s %n %%",
            "#not a comment",
            "=cmd",
            "(a) {b}",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every printable ASCII character and a few controls, alone and in pairs with a quote
        // and a backslash.
        for b in (1u8..=127).filter(|b| *b != b'\n') {
            let c = b as char;
            all.push(c.to_string());
            all.push(format!("'{c}\\"));
            all.push(format!("\\{c}'"));
        }
        all
    }

    /// Each shell installed here prints back exactly what was quoted. CI installs all four;
    /// one missing here is said, not passed over in silence.
    #[test]
    fn every_agent_shell_reads_the_quoted_word_back_exactly() {
        let corpus = corpus();
        let mut ran = 0;
        for shell in ["bash", "dash", "zsh", "fish"] {
            let found = Command::new(shell).arg("-c").arg("true").status();
            if !found.is_ok_and(|s| s.success()) {
                assert!(
                    std::env::var_os("CORDON_TEST_NO_SKIP").is_none(),
                    "{shell} is not installed"
                );
                eprintln!("skipped: {shell} is not installed");
                continue;
            }
            // One process per shell: each word printed between markers.
            let script: String = corpus
                .iter()
                .map(|s| format!("printf '%s\\0' {}\n", quote(s)))
                .collect();
            let mut cmd = Command::new(shell);
            if shell == "zsh" {
                // The option a user's zshrc may set, under which `''` in quotes is a quote.
                cmd.args(["-o", "rcquotes"]);
            }
            let out = cmd.arg("-c").arg(&script).output().expect("runs");
            assert!(
                out.status.success(),
                "{shell}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let got: Vec<&[u8]> = out.stdout.split(|b| *b == 0).collect();
            assert_eq!(got.len(), corpus.len() + 1, "{shell}: one word each");
            for (want, got) in corpus.iter().zip(&got) {
                assert_eq!(
                    String::from_utf8_lossy(got),
                    *want,
                    "{shell} read {} back otherwise",
                    quote(want)
                );
            }
            ran += 1;
        }
        assert!(ran >= 2, "bash and dash at least");
    }

    #[test]
    fn the_rewrite_names_cordon_and_the_command_and_refuses_a_nul() {
        let line =
            rewrite(Path::new("/opt/cordon"), "ls 'x'", Containment::Settings).expect("rewrites");
        assert_eq!(
            line,
            "'/opt/cordon' run --ask-domains deny -c 'ls '\\''x'\\'"
        );
        let contained = rewrite(Path::new("/c"), "make", Containment::Contained).expect("rewrites");
        assert!(contained.contains("--profile contained"));
        assert!(contained.contains("--fail-if-unavailable"));
        assert_eq!(
            rewrite(Path::new("/c"), "a\0b", Containment::Settings),
            None
        );
    }
}
