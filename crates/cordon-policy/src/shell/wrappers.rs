//! Commands that run other commands: see through them to what really runs.

use super::{HereDoc, Role, SimpleCommand, Walker, canonical_text};

/// What a command does with the rest of its arguments.
enum Wraps {
    /// Nothing special: it is the command that runs.
    Nothing,
    /// `words[start..]` is another command (`sudo rm x`, `env A=b cmd`).
    Command {
        start: usize,
        label: String,
        extra_writes: Vec<String>,
    },
    /// The argument is a script for a shell (`bash -c '…'`, `watch 'cmd'`, `trap '…' EXIT`).
    Script { script: String, label: String },
    /// A shell that reads its script from standard input.
    StdinScript { label: String },
    /// `find … -exec cmd … ;`: find runs, and so does each inner command.
    FindExec { inner: Vec<Vec<String>> },
    /// Something we will not try to see through.
    Refuse(String),
}

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish",
];

/// Directories from which a wrapper's name is trusted to mean the system program. A wrapper
/// named by any other path (`./sudo`) is a program of its own and is checked as such.
const SYSTEM_DIRS: &[&str] = &[
    "/bin/",
    "/usr/bin/",
    "/usr/local/bin/",
    "/sbin/",
    "/usr/sbin/",
];

pub(super) fn program_name(word: &str) -> Option<&str> {
    if !word.contains('/') {
        return Some(word);
    }
    SYSTEM_DIRS
        .iter()
        .find_map(|d| word.strip_prefix(d))
        .filter(|rest| !rest.contains('/'))
}

pub(super) fn unwrap(w: &mut Walker, mut cmd: SimpleCommand, stdin: Option<HereDoc>, depth: usize) {
    let wraps = match program_name(&cmd.words[0]) {
        Some(name) => classify(name, &cmd.words, &mut cmd.assignments),
        None => Wraps::Nothing,
    };
    match wraps {
        Wraps::Nothing => w.push(cmd),
        Wraps::Command {
            start,
            label,
            extra_writes,
        } => {
            cmd.writes.extend(extra_writes);
            if start >= cmd.words.len() {
                // `env`, `nohup` or `sudo -s` alone: the wrapper itself is what runs.
                w.push(cmd);
                return;
            }
            let mut via = cmd.via.clone();
            via.push(label);
            let words = cmd.words[start..].to_vec();
            let mut inner = SimpleCommand::new(words, &via, Role::Runs);
            inner.writes = std::mem::take(&mut cmd.writes);
            inner.assignments = cmd.assignments.clone();
            if depth + 1 > super::MAX_DEPTH {
                w.problem(format!(
                    "wrappers nested more than {} levels deep",
                    super::MAX_DEPTH
                ));
                return;
            }
            w.push(SimpleCommand {
                role: Role::Context,
                ..cmd
            });
            unwrap(w, inner, stdin, depth + 1);
        }
        Wraps::Script { script, label } => {
            let via = push_context(w, cmd, &label);
            w.script(&script, depth + 1, &via);
        }
        Wraps::StdinScript { label } => {
            let via = push_context(w, cmd, &label);
            match stdin {
                Some(HereDoc::Body {
                    text,
                    expands: false,
                }) => w.script(&text, depth + 1, &via),
                Some(HereDoc::Body { expands: true, .. }) => w.problem(format!(
                    "`{label}` runs a heredoc whose text is only known at run time"
                )),
                Some(HereDoc::Pipe) => w.problem(format!(
                    "`{label}` runs whatever is piped into it, which cannot be checked"
                )),
                Some(HereDoc::FromFile) | None => w.problem(format!(
                    "`{label}` reads its script from standard input, which cannot be checked"
                )),
            }
        }
        Wraps::FindExec { inner } => {
            let via = {
                let mut v = cmd.via.clone();
                v.push("find -exec".to_string());
                v
            };
            w.push(cmd);
            for words in inner {
                if words.is_empty() {
                    continue;
                }
                let c = SimpleCommand::new(words, &via, Role::Runs);
                unwrap(w, c, None, depth + 1);
            }
        }
        Wraps::Refuse(why) => {
            w.problem(why);
            w.push(cmd);
        }
    }
}

/// Records the wrapper as context (and its redirections as a write of their own) and returns
/// the `via` chain for what it runs.
fn push_context(w: &mut Walker, cmd: SimpleCommand, label: &str) -> Vec<String> {
    let mut via = cmd.via.clone();
    via.push(label.to_string());
    // What the wrapper's own redirections write and the variables it sets apply whatever the
    // script does, so they are judged on their own.
    if !cmd.writes.is_empty() || !cmd.assignments.is_empty() {
        let mut bare = SimpleCommand::new(Vec::new(), &cmd.via, Role::Runs);
        bare.writes = cmd.writes.clone();
        bare.assignments = cmd.assignments.clone();
        w.push(bare);
    }
    w.push(SimpleCommand {
        role: Role::Context,
        writes: Vec::new(),
        ..cmd
    });
    via
}

/// Walks options: `with_value` options consume the next word (or an attached value), other
/// words starting with `-` are flags, `--` ends the options. Returns the first operand.
fn skip_options(words: &[String], mut i: usize, with_value: &[&str]) -> usize {
    while i < words.len() {
        let a = words[i].as_str();
        if a == "--" {
            return i + 1;
        }
        if !a.starts_with('-') || a == "-" {
            return i;
        }
        let takes_value = with_value.contains(&a);
        i += if takes_value { 2 } else { 1 };
    }
    i
}

fn classify(name: &str, words: &[String], assignments: &mut Vec<String>) -> Wraps {
    let cmd = |start: usize, label: &str| Wraps::Command {
        start,
        label: label.to_string(),
        extra_writes: Vec::new(),
    };
    match name {
        "env" => {
            let mut i = 1;
            while i < words.len() {
                let a = words[i].as_str();
                if a == "--" {
                    i += 1;
                    break;
                }
                if a.starts_with("-S") || a.starts_with("--split-string") {
                    return Wraps::Refuse(
                        "`env -S` splits a string into a command, which is not analysed".into(),
                    );
                }
                if matches!(a, "-u" | "--unset" | "-C" | "--chdir") {
                    i += 2;
                } else if a.starts_with('-') {
                    i += 1;
                } else if let Some((var, _)) = a.split_once('=') {
                    assignments.push(var.to_string());
                    i += 1;
                } else {
                    break;
                }
            }
            cmd(i, "env")
        }
        "nohup" | "builtin" | "setsid" => cmd(skip_options(words, 1, &[]), name),
        "nice" => cmd(skip_options(words, 1, &["-n", "--adjustment"]), "nice"),
        "ionice" => cmd(
            skip_options(words, 1, &["-c", "-n", "--class", "--classdata"]),
            "ionice",
        ),
        "stdbuf" => cmd(skip_options(words, 1, &["-i", "-o", "-e"]), "stdbuf"),
        "timeout" => {
            let i = skip_options(words, 1, &["-k", "--kill-after", "-s", "--signal"]);
            // The first operand is the duration.
            cmd(i + 1, "timeout")
        }
        "time" => {
            let i = skip_options(words, 1, &["-f", "--format", "-o", "--output"]);
            let mut extra = Vec::new();
            let mut j = 1;
            while j < i {
                let a = words[j].as_str();
                if (a == "-o" || a == "--output") && j + 1 < words.len() {
                    extra.push(words[j + 1].clone());
                } else if let Some(f) = a.strip_prefix("--output=") {
                    extra.push(f.to_string());
                }
                j += 1;
            }
            Wraps::Command {
                start: i,
                label: "time".into(),
                extra_writes: extra,
            }
        }
        "command" => {
            if words
                .get(1)
                .is_some_and(|a| a.starts_with('-') && a.contains(['v', 'V']))
            {
                // `command -v x` only looks a name up.
                return Wraps::Nothing;
            }
            cmd(skip_options(words, 1, &[]), "command")
        }
        "exec" => cmd(skip_options(words, 1, &["-a"]), "exec"),
        "xargs" => cmd(
            skip_options(
                words,
                1,
                &[
                    "-a",
                    "--arg-file",
                    "-d",
                    "--delimiter",
                    "-E",
                    "-I",
                    "-L",
                    "--max-lines",
                    "-n",
                    "--max-args",
                    "-P",
                    "--max-procs",
                    "-s",
                    "--max-chars",
                    "--process-slot-var",
                ],
            ),
            "xargs",
        ),
        "sudo" | "doas" => {
            if words.iter().skip(1).any(|a| a == "-e" || a == "--edit") {
                return Wraps::Nothing;
            }
            let with_value: &[&str] = if name == "sudo" {
                &[
                    "-u",
                    "-g",
                    "-h",
                    "-p",
                    "-C",
                    "-D",
                    "-r",
                    "-t",
                    "-T",
                    "-U",
                    "--user",
                    "--group",
                    "--host",
                    "--prompt",
                    "--close-from",
                    "--chdir",
                    "--role",
                    "--type",
                    "--command-timeout",
                    "--other-user",
                ]
            } else {
                &["-u", "-C"]
            };
            cmd(skip_options(words, 1, with_value), name)
        }
        "su" | "runuser" => {
            let pos = words.iter().position(|a| a == "-c" || a == "--command");
            match pos.and_then(|p| words.get(p + 1)) {
                Some(script) => Wraps::Script {
                    script: script.clone(),
                    label: format!("{name} -c"),
                },
                None if pos.is_some() => Wraps::Refuse(format!("`{name} -c` without a command")),
                None => Wraps::Nothing,
            }
        }
        "watch" => {
            let i = skip_options(
                words,
                1,
                &["-n", "--interval", "-q", "--equexit", "-s", "--shotsdir"],
            );
            if words[1..i.min(words.len())]
                .iter()
                .any(|a| a == "-x" || a == "--exec")
            {
                cmd(i, "watch")
            } else if i < words.len() {
                // watch hands its arguments, joined by spaces, to `sh -c`.
                Wraps::Script {
                    script: words[i..].join(" "),
                    label: "watch".into(),
                }
            } else {
                Wraps::Nothing
            }
        }
        "trap" => match words.get(1) {
            Some(action) if words.len() > 2 && action != "-" && !action.starts_with('-') => {
                Wraps::Script {
                    script: action.clone(),
                    label: "trap".into(),
                }
            }
            _ => Wraps::Nothing,
        },
        "find" => find_exec(words),
        "eval" | "source" | "." | "alias" | "enable" | "fc" => Wraps::Refuse(format!(
            "`{name}` runs code that is not visible in the command line"
        )),
        "hash" if words.iter().any(|a| a.starts_with("-p")) => {
            Wraps::Refuse("`hash -p` makes a name run another program".into())
        }
        "let" => match words[1..].iter().find_map(|a| super::arithmetic_problem(a)) {
            Some(why) => Wraps::Refuse(why),
            None => Wraps::Nothing,
        },
        // Each takes variable names, whose array index bash evaluates as arithmetic, command
        // substitutions included (`test -v 'a[$(…)]'`).
        "export" | "declare" | "typeset" | "local" | "readonly" | "read" | "printf" | "unset"
        | "mapfile" | "readarray" | "test" | "[" => {
            for a in &words[1..] {
                if let Some((var, _)) = a.split_once('=') {
                    assignments.push(var.to_string());
                }
                if a.contains('[') && a.contains(['$', '`']) {
                    return Wraps::Refuse(format!(
                        "`{name}` evaluates the array index in `{a}`, which can run commands"
                    ));
                }
            }
            Wraps::Nothing
        }
        _ if SHELLS.contains(&name) => shell(name, words),
        _ => Wraps::Nothing,
    }
}

/// `bash [options] -c SCRIPT [name [args…]]`, `bash FILE`, or a shell reading stdin.
fn shell(name: &str, words: &[String]) -> Wraps {
    let mut i = 1;
    let mut has_c = false;
    let mut reads_stdin = false;
    while i < words.len() {
        let a = words[i].as_str();
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if a.starts_with("--") {
            // Long options; those that take a file name take the next word.
            i += if matches!(a, "--rcfile" | "--init-file") {
                2
            } else {
                1
            };
            continue;
        }
        if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
            let flags = &a[1..];
            has_c |= flags.contains('c');
            reads_stdin |= flags.contains('s');
            // `-o opt` and `-O opt` take the next word.
            i += if flags.contains(['o', 'O']) { 2 } else { 1 };
            continue;
        }
        break;
    }
    if has_c {
        return match words.get(i) {
            Some(script) => Wraps::Script {
                script: script.clone(),
                label: format!("{name} -c"),
            },
            None => Wraps::Refuse(format!("`{name} -c` without a script")),
        };
    }
    if i < words.len() && !reads_stdin {
        // `bash script.sh`: the file's content is not visible; check the command as written.
        return Wraps::Nothing;
    }
    Wraps::StdinScript {
        label: canonical_text(&words[..i.min(words.len())]),
    }
}

fn find_exec(words: &[String]) -> Wraps {
    let mut inner = Vec::new();
    let mut i = 1;
    while i < words.len() {
        if matches!(words[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < words.len() && words[end] != ";" && words[end] != "+" {
                end += 1;
            }
            inner.push(words[start..end].to_vec());
            i = end;
        }
        i += 1;
    }
    if inner.is_empty() {
        Wraps::Nothing
    } else {
        Wraps::FindExec { inner }
    }
}

#[cfg(test)]
mod tests {
    use crate::shell::{Role, analyse};

    fn runs(script: &str) -> Vec<(String, Vec<String>)> {
        let a = analyse(script);
        assert!(a.is_analysable(), "{script}: {:?}", a.problems);
        a.commands
            .iter()
            .filter(|c| c.role == Role::Runs)
            .map(|c| (c.text.clone(), c.via.clone()))
            .collect()
    }

    fn inner(script: &str) -> Vec<String> {
        runs(script).into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn shells_with_c_in_any_flag_combination() {
        for s in [
            "bash -c 'rm -rf /'",
            "sh -lc 'rm -rf /'",
            "bash -x -c 'rm -rf /'",
            "zsh -ec 'rm -rf /'",
            "dash -c 'rm -rf /' name arg",
            "/bin/bash -c 'rm -rf /'",
        ] {
            assert_eq!(inner(s), ["rm -rf /"], "{s}");
        }
    }

    #[test]
    fn transparent_wrappers() {
        for s in [
            "env rm -rf /",
            "env -i A=1 rm -rf /",
            "A=1 rm -rf /",
            "command rm -rf /",
            "exec rm -rf /",
            "nice -n 5 rm -rf /",
            "nohup rm -rf /",
            "timeout -s KILL 5 rm -rf /",
            "time rm -rf /",
            "xargs -0 rm -rf /",
            "sudo -u root rm -rf /",
            "doas rm -rf /",
            "sudo env nice rm -rf /",
        ] {
            assert_eq!(inner(s), ["rm -rf /"], "{s}");
        }
        assert_eq!(runs("sudo rm x")[0].1, ["sudo"]);
    }

    #[test]
    fn stdin_scripts() {
        assert_eq!(inner("bash <<'EOF'\nrm -rf /\nEOF\n"), ["rm -rf /"]);
        assert!(!analyse("curl x | sh").is_analysable());
        assert!(!analyse("bash < script.sh").is_analysable());
        assert_eq!(inner("bash script.sh"), ["bash script.sh"]);
    }

    #[test]
    fn find_exec_inner_commands() {
        assert_eq!(
            inner("find . -name x -exec rm {} \\;"),
            ["find . -name x -exec rm '{}' ';'", "rm '{}'"]
        );
    }

    #[test]
    fn local_programs_named_like_wrappers_are_not_unwrapped() {
        assert_eq!(inner("./timeout 1 ls"), ["./timeout 1 ls"]);
    }

    #[test]
    fn eval_and_friends_are_refused() {
        for s in [
            "eval ls",
            "source x.sh",
            ". x.sh",
            "env -S 'rm -rf /'",
            "let 'a[$(id)]'",
            "printf -v 'a[$(id)]' x",
            "hash -p /tmp/x ls",
        ] {
            assert!(!analyse(s).is_analysable(), "{s}");
        }
    }
}
