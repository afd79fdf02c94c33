//! Commands that run other commands: see through them to what really runs.

use super::dialect::{self, Dialect};
use super::getopt::{self, Arg, Options};
use super::{HereDoc, Known, Role, SimpleCommand, Walker, canonical_text};

/// What a command does with the rest of its arguments.
enum Wraps {
    /// Nothing special: it is the command that runs.
    Nothing,
    /// `words[start..]` is another command (`sudo rm x`, `env A=b cmd`).
    Command {
        start: usize,
        label: String,
        extra_writes: Vec<String>,
        /// The wrapper appends arguments of its own, read at run time (`xargs`).
        appends: bool,
    },
    /// The argument is a script for a shell (`bash -c '…'`, `watch 'cmd'`, `trap '…' EXIT`),
    /// of `dialect` (`None`: the shell running the command, as for `trap`).
    Script {
        script: String,
        label: String,
        dialect: Option<Dialect>,
    },
    /// A shell of `dialect` that reads its script from standard input.
    StdinScript { label: String, dialect: Dialect },
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
    if let Some(why) = dialect::command_differs(&cmd.words[0], w.dialect) {
        w.problem(why);
    }
    let wraps = match program_name(&cmd.words[0]).map(str::to_owned) {
        Some(name) => classify(&name, &mut cmd),
        None => Wraps::Nothing,
    };
    match wraps {
        Wraps::Nothing => w.push(cmd),
        Wraps::Command {
            start,
            label,
            extra_writes,
            appends,
        } => {
            cmd.writes.extend(extra_writes);
            if start >= cmd.words.len() {
                // `env`, `nohup` or `sudo -s` alone: the wrapper itself is what runs.
                w.push(cmd);
                return;
            }
            // Where the inner command starts must not hinge on a word only known at run time:
            // one that splits could move it, and the name itself must be known.
            if let Some(i) = (1..start).find(|&i| cmd.known(i) == Known::Words) {
                w.problem(format!(
                    "`{}` may be several words at run time, moving the command `{label}` runs",
                    cmd.words[i]
                ));
            } else if cmd.known(start) != Known::Literal {
                w.problem(format!(
                    "the command `{label}` runs, `{}`, is only known at run time",
                    cmd.words[start]
                ));
            }
            let mut via = cmd.via.clone();
            via.push(label);
            let words = cmd.words[start..].to_vec();
            let mut inner = SimpleCommand::new(words, &via, Role::Runs);
            inner.known = cmd.known.get(start..).unwrap_or_default().to_vec();
            inner.more_at_run_time = cmd.more_at_run_time || appends;
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
        Wraps::Script {
            script,
            label,
            dialect,
        } => {
            let via = push_context(w, cmd, &label);
            w.script_in(&script, depth + 1, &via, dialect);
        }
        Wraps::StdinScript { label, dialect } => {
            let via = push_context(w, cmd, &label);
            match stdin {
                Some(HereDoc::Body {
                    text,
                    expands: false,
                }) => w.script_in(&text, depth + 1, &via, Some(dialect)),
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
                let mut c = SimpleCommand::new(words, &via, Role::Runs);
                // find puts each file name where `{}` stands, and after `+`, several.
                for (k, word) in c.known.iter_mut().zip(&c.words) {
                    if word.contains("{}") {
                        *k = Known::Words;
                    }
                }
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

const HELP: [(&str, Arg); 2] = [("help", Arg::No), ("version", Arg::No)];

/// Each wrapper's options, as its manual lists them (coreutils, findutils, util-linux,
/// procps, GNU time, sudo, doas, bash's builtins). Each stops at its first operand.
const fn runs_command(short: &'static str, long: &'static [(&'static str, Arg)]) -> Options {
    Options {
        short,
        long,
        numeric: false,
        permute: false,
    }
}

const NO_OPTIONS: Options = runs_command("", &HELP);
const ENV: Options = runs_command(
    "C:iS:u:v0",
    &[
        ("ignore-environment", Arg::No),
        ("null", Arg::No),
        ("unset", Arg::Required),
        ("chdir", Arg::Required),
        ("split-string", Arg::Required),
        ("block-signal", Arg::Optional),
        ("default-signal", Arg::Optional),
        ("ignore-signal", Arg::Optional),
        ("list-signal-handling", Arg::No),
        ("debug", Arg::No),
        HELP[0],
        HELP[1],
    ],
);
const SETSID: Options = runs_command(
    "cfwhV",
    &[
        ("ctty", Arg::No),
        ("fork", Arg::No),
        ("wait", Arg::No),
        HELP[0],
        HELP[1],
    ],
);
const NICE: Options = Options {
    numeric: true,
    ..runs_command("n:", &[("adjustment", Arg::Required), HELP[0], HELP[1]])
};
const IONICE: Options = runs_command(
    "c:n:p:P:tu:Vh",
    &[
        ("class", Arg::Required),
        ("classdata", Arg::Required),
        ("pid", Arg::Required),
        ("pgid", Arg::Required),
        ("ignore", Arg::No),
        ("uid", Arg::Required),
        HELP[0],
        HELP[1],
    ],
);
const STDBUF: Options = runs_command(
    "i:o:e:",
    &[
        ("input", Arg::Required),
        ("output", Arg::Required),
        ("error", Arg::Required),
        HELP[0],
        HELP[1],
    ],
);
const TIMEOUT: Options = runs_command(
    "fk:ps:v",
    &[
        ("foreground", Arg::No),
        ("kill-after", Arg::Required),
        ("preserve-status", Arg::No),
        ("signal", Arg::Required),
        ("verbose", Arg::No),
        HELP[0],
        HELP[1],
    ],
);
const TIME: Options = runs_command(
    "af:o:pqvV",
    &[
        ("append", Arg::No),
        ("format", Arg::Required),
        ("output", Arg::Required),
        ("portability", Arg::No),
        ("quiet", Arg::No),
        ("verbose", Arg::No),
        HELP[0],
        HELP[1],
    ],
);
const COMMAND: Options = runs_command("pvV", &[]);
const EXEC: Options = runs_command("cla:", &[]);
const XARGS: Options = runs_command(
    "0a:E:e::i::I:l::L:n:oprs:txP:d:",
    &[
        ("null", Arg::No),
        ("arg-file", Arg::Required),
        ("delimiter", Arg::Required),
        ("eof", Arg::Optional),
        ("replace", Arg::Optional),
        ("max-lines", Arg::Optional),
        ("max-args", Arg::Required),
        ("max-procs", Arg::Required),
        ("interactive", Arg::No),
        ("no-run-if-empty", Arg::No),
        ("max-chars", Arg::Required),
        ("verbose", Arg::No),
        ("exit", Arg::No),
        ("show-limits", Arg::No),
        ("open-tty", Arg::No),
        ("process-slot-var", Arg::Required),
        HELP[0],
        HELP[1],
    ],
);
const SUDO: Options = runs_command(
    "Aa:BbC:c:D:Eeg:Hh::iKklNnPp:R:r:SsT:t:U:u:Vv",
    &[
        ("askpass", Arg::No),
        ("auth-type", Arg::Required),
        ("background", Arg::No),
        ("bell", Arg::No),
        ("close-from", Arg::Required),
        ("login-class", Arg::Required),
        ("chdir", Arg::Required),
        ("preserve-env", Arg::Optional),
        ("edit", Arg::No),
        ("group", Arg::Required),
        ("set-home", Arg::No),
        ("host", Arg::Required),
        ("login", Arg::No),
        ("remove-timestamp", Arg::No),
        ("reset-timestamp", Arg::No),
        ("list", Arg::No),
        ("no-update", Arg::No),
        ("non-interactive", Arg::No),
        ("preserve-groups", Arg::No),
        ("prompt", Arg::Required),
        ("chroot", Arg::Required),
        ("role", Arg::Required),
        ("stdin", Arg::No),
        ("shell", Arg::No),
        ("command-timeout", Arg::Required),
        ("type", Arg::Required),
        ("other-user", Arg::Required),
        ("user", Arg::Required),
        ("validate", Arg::No),
        HELP[0],
        HELP[1],
    ],
);
const DOAS: Options = runs_command("a:C:Lnsu:", &[]);
const WATCH: Options = runs_command(
    "bcCd::efgn:pq:rs:tvwxh",
    &[
        ("beep", Arg::No),
        ("color", Arg::No),
        ("no-color", Arg::No),
        ("differences", Arg::Optional),
        ("errexit", Arg::No),
        ("follow", Arg::No),
        ("chgexit", Arg::No),
        ("interval", Arg::Required),
        ("precise", Arg::No),
        ("equexit", Arg::Required),
        ("no-rerun", Arg::No),
        ("shotsdir", Arg::Required),
        ("no-title", Arg::No),
        ("no-wrap", Arg::No),
        ("exec", Arg::No),
        HELP[0],
        HELP[1],
    ],
);

fn classify(name: &str, cmd: &mut SimpleCommand) -> Wraps {
    let options = match name {
        "env" => &ENV,
        "nohup" | "builtin" => &NO_OPTIONS,
        "setsid" => &SETSID,
        "nice" => &NICE,
        "ionice" => &IONICE,
        "stdbuf" => &STDBUF,
        "timeout" => &TIMEOUT,
        "time" => &TIME,
        "command" => &COMMAND,
        "exec" => &EXEC,
        "xargs" => &XARGS,
        "sudo" => &SUDO,
        "doas" => &DOAS,
        "watch" => &WATCH,
        _ => return classify_other(name, cmd),
    };
    let found = match getopt::read(&cmd.words, &cmd.known, 1, options) {
        Ok(found) => found,
        Err(why) => return Wraps::Refuse(format!("`{name}`: {why}")),
    };
    let mut start = found.first_operand(cmd.words.len());
    let mut extra_writes = Vec::new();
    match name {
        "env" => {
            if found.has("split-string") || found.has("S") {
                return Wraps::Refuse(
                    "`env -S` splits a string into a command, which is not analysed".into(),
                );
            }
            while let Some((var, _)) = cmd.words.get(start).and_then(|a| a.split_once('=')) {
                cmd.assignments.push(var.to_string());
                start += 1;
            }
        }
        // With a process, group or user named, it changes those and runs nothing.
        "ionice"
            if ["p", "P", "u", "pid", "pgid", "uid"]
                .iter()
                .any(|o| found.has(o)) =>
        {
            return Wraps::Nothing;
        }
        // The first operand is the duration.
        "timeout" => start += 1,
        "time" => extra_writes.extend(
            found
                .options
                .iter()
                .filter(|(o, _)| o == "o" || o == "output")
                .filter_map(|(_, file)| file.clone()),
        ),
        // `command -v x` only looks a name up.
        "command" if found.has("v") || found.has("V") => return Wraps::Nothing,
        "sudo" if found.has("e") || found.has("edit") => return Wraps::Nothing,
        // watch hands its arguments, joined by spaces, to `sh -c`.
        "watch" if !(found.has("x") || found.has("exec")) => {
            return match cmd.words.get(start..) {
                // watch hands its command to `sh -c`.
                Some(rest) if !rest.is_empty() => Wraps::Script {
                    script: rest.join(" "),
                    label: "watch".into(),
                    dialect: Some(Dialect::Posix),
                },
                _ => Wraps::Nothing,
            };
        }
        _ => {}
    }
    Wraps::Command {
        start,
        label: name.to_string(),
        extra_writes,
        appends: name == "xargs",
    }
}

fn classify_other(name: &str, cmd: &mut SimpleCommand) -> Wraps {
    let words = &cmd.words;
    match name {
        "su" | "runuser" => {
            let pos = words.iter().position(|a| a == "-c" || a == "--command");
            match pos.and_then(|p| words.get(p + 1)) {
                // The target user's login shell, whichever it is.
                Some(script) => Wraps::Script {
                    script: script.clone(),
                    label: format!("{name} -c"),
                    dialect: Some(Dialect::Unknown),
                },
                None if pos.is_some() => Wraps::Refuse(format!("`{name} -c` without a command")),
                None => Wraps::Nothing,
            }
        }
        "trap" => match words.get(1) {
            Some(action) if words.len() > 2 && action != "-" && !action.starts_with('-') => {
                Wraps::Script {
                    script: action.clone(),
                    label: "trap".into(),
                    dialect: None,
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
        "export" | "declare" | "typeset" | "local" | "readonly" | "read" | "printf" | "unset"
        | "mapfile" | "readarray" | "getopts" | "wait" | "test" | "[" => {
            match variable_names(name, cmd) {
                Ok(()) => Wraps::Nothing,
                Err(why) => Wraps::Refuse(format!("`{name}`: {why}")),
            }
        }
        _ if SHELLS.contains(&name) => shell(name, words),
        _ => Wraps::Nothing,
    }
}

/// Builtins that take variable names. Bash evaluates an array index in a name as arithmetic,
/// and arithmetic evaluates the variables it names, recursively: `test -v 'a[i]'` runs `cmd`
/// when `i` holds `a[$(cmd)]`. So each name must be known, with no index but a number.
fn variable_names(name: &str, cmd: &mut SimpleCommand) -> Result<(), String> {
    let mut names: Vec<usize> = Vec::new();
    // Bash's builtins stop at their first operand, as the wrappers do.
    let read = |short| getopt::read(&cmd.words, &cmd.known, 1, &runs_command(short, &[]));
    match name {
        "export" | "declare" | "typeset" | "local" | "readonly" => {
            for (i, a) in cmd.words.iter().enumerate().skip(1) {
                if a.starts_with(['-', '+']) {
                    // An integer variable evaluates every value given to it as arithmetic;
                    // a name reference's value is a name, array index and all.
                    if name != "export" && a.contains(['i', 'n']) {
                        return Err(format!(
                            "`{a}` makes later values arithmetic or names, which can run commands"
                        ));
                    }
                    continue;
                }
                if let Some((var, _)) = a.split_once('=') {
                    cmd.assignments.push(var.to_string());
                }
                names.push(i);
            }
        }
        "read" => {
            let found = read("ersa:d:i:n:N:p:t:u:")?;
            let array = found.options.iter().zip(&found.value_words);
            names.extend(array.filter(|((o, _), _)| o == "a").map(|(_, &at)| at));
            names.extend(found.operands);
        }
        "mapfile" | "readarray" => {
            let found = read("d:n:O:s:tu:C:c:")?;
            if found.has("C") {
                return Err("`-C` runs a command for each line it reads".into());
            }
            names.extend(found.operands);
        }
        // `printf -v NAME`, `wait -p NAME`: their only option with a value takes a name.
        "printf" => names.extend(read("v:")?.value_words),
        "wait" => names.extend(read("fnp:")?.value_words),
        "unset" => names.extend(read("fvn")?.operands),
        "getopts" => names.extend(read("")?.operands.get(1)),
        // `test` and `[`: the word after `-v` or `-R` is a name.
        _ => names.extend(
            (2..cmd.words.len()).filter(|&i| matches!(cmd.words[i - 1].as_str(), "-v" | "-R")),
        ),
    }
    for i in names {
        let word = &cmd.words[i];
        // The word is `NAME=value`, or `-aNAME` with the option attached.
        let word = match word.strip_prefix('-') {
            Some(attached) => attached.get(1..).unwrap_or_default(),
            None => word,
        };
        let var = word.split_once('=').map_or(word, |(n, _)| n);
        if let Some(why) = super::words::name_problem(var, cmd.known(i) != Known::Literal) {
            return Err(why);
        }
    }
    Ok(())
}

/// `bash [options] -c SCRIPT [name [args…]]`, `bash FILE`, or a shell reading stdin.
fn shell(name: &str, words: &[String]) -> Wraps {
    let Some(dialect) = Dialect::of_shell(name) else {
        return Wraps::Refuse(format!(
            "`{name}` reads a grammar other than bash's and POSIX sh's, which cordon does not analyse"
        ));
    };
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
                dialect: Some(dialect),
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
        dialect,
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
            "xargs -0I cat rm -rf /",
            "xargs -0Icat rm -rf /",
            "xargs --max-a 1 rm -rf /",
            "env -iu X rm -rf /",
            "nice -10 rm -rf /",
            "timeout --sig KILL 5 rm -rf /",
            "stdbuf -oL rm -rf /",
            "setsid -w rm -rf /",
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
    fn names_without_an_evaluated_index_are_fine() {
        for s in [
            "test -v x",
            "echo ${a[0]} ${a[@]} ${#a[@]} ${s:1:2}",
            "a[0]=1",
            "printf -v x '%s' y",
            "read -r line",
            "read -p '[y/n] ' ans",
            "unset x",
            "declare -a xs",
            "export A=b",
            "printf '[%s]' x",
            "nice -n \"$n\" ls",
        ] {
            assert!(analyse(s).is_analysable(), "{s}: {:?}", analyse(s).problems);
        }
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
            // Arithmetic evaluates the variables it names: no `$` needed.
            "test -v 'a[x]'",
            "[ -v 'a[i]' ]",
            "[[ -v a[i] ]]",
            "[[ -v $name ]]",
            "test -v \"$name\"",
            "echo ${a[x]}",
            "echo ${#a[i]}",
            "echo ${s:i:1}",
            "echo ${s:1:n}",
            "a[i]=1",
            "printf -v 'a[i]' x",
            "printf -va[i] x",
            "read 'a[i]'",
            "read -a \"$n\"",
            "unset 'a[i]'",
            "mapfile -C cb arr",
            "declare -i n",
            "local -n ref=x",
            "wait -p 'a[i]'",
            "getopts ab 'a[i]'",
            // Options only known at run time, or a command name after them.
            "xargs $opts rm",
            "env $x rm",
            "nice -n $n rm",
            "timeout $t rm",
            "env \"$cmd\" x",
            "env -S'rm -rf /'",
            "env -iS'rm -rf /'",
            "xargs --frobnicate rm",
        ] {
            assert!(!analyse(s).is_analysable(), "{s}");
        }
    }
}
