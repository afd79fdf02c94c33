//! Built-in knowledge about commands: which are dangerous, which only read.
//!
//! These are not decisions. The policy files name them (`heuristic = "dangerous"` or
//! `heuristic = "read-only"` in a rule), so users can see them, raise or lower them, and
//! replace them with rules of their own.

use super::getopt::{self, Arg, Options};
use super::wrappers::program_name;
use super::{Known, SimpleCommand};

/// A named built-in classifier a rule can refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Heuristic {
    /// Commands that destroy data, rewrite history, raise privileges or load foreign code.
    Dangerous,
    /// Commands known to only read.
    ReadOnly,
}

impl Heuristic {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "dangerous" => Some(Heuristic::Dangerous),
            "read-only" => Some(Heuristic::ReadOnly),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Heuristic::Dangerous => "dangerous",
            Heuristic::ReadOnly => "read-only",
        }
    }

    pub fn matches(self, cmd: &SimpleCommand) -> bool {
        match self {
            Heuristic::Dangerous => danger(cmd).is_some(),
            Heuristic::ReadOnly => is_read_only(cmd),
        }
    }
}

/// Variables that make programs load or run other code. Setting one turns an ordinary
/// command into a way to run anything.
fn loads_code(var: &str) -> bool {
    const EXACT: &[&str] = &[
        "PATH",
        "BASH_ENV",
        "ENV",
        "IFS",
        "PROMPT_COMMAND",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "PAGER",
        "MANPAGER",
        "EDITOR",
        "VISUAL",
        "BROWSER",
        "SSH_ASKPASS",
        "LESSOPEN",
        "LESSCLOSE",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "RUSTC_WRAPPER",
        "RUSTC",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "ZDOTDIR",
        "HOME",
        "XDG_CONFIG_HOME",
        // A config file of options, `--pre=PROGRAM` among them.
        "RIPGREP_CONFIG_PATH",
        // glibc's character-set converters and OpenSSL's engines are shared objects.
        "GCONV_PATH",
        "OPENSSL_CONF",
        "OPENSSL_ENGINES",
        "OPENSSL_MODULES",
    ];
    EXACT.contains(&var)
        || ["GIT_", "LD_", "DYLD_", "BASH_FUNC_"]
            .iter()
            .any(|p| var.starts_with(p))
}

fn short_flags(words: &[String]) -> impl Iterator<Item = &str> {
    words
        .iter()
        .skip(1)
        .map(String::as_str)
        .filter(|a| a.starts_with('-') && !a.starts_with("--") && a.len() > 1)
        .map(|a| &a[1..])
}

fn has_flag(words: &[String], short: char, long: &[&str]) -> bool {
    short_flags(words).any(|f| f.contains(short)) || has_long(words, long)
}

/// Whether any word is one of the `long` options (`--name`, `--name=value`) in any spelling
/// the program accepts: GNU's getopt and git's option parser take every unambiguous
/// abbreviation (`sort --outp=F` is `--output=F`). Any prefix counts here, ambiguous or not:
/// a read-only verdict must not hinge on what else the program's options are called.
fn has_long(words: &[String], long: &[&str]) -> bool {
    words.iter().skip(1).any(|a| {
        let Some(given) = a.strip_prefix("--") else {
            return false;
        };
        let name = given.split_once('=').map_or(given, |(n, _)| n);
        !name.is_empty()
            && long
                .iter()
                .any(|l| l.strip_prefix("--").is_some_and(|l| l.starts_with(name)))
    })
}

fn has_any(words: &[String], options: &[&str]) -> bool {
    words.iter().skip(1).any(|a| options.contains(&a.as_str()))
}

/// Why a command is dangerous, or `None`.
pub fn danger(cmd: &SimpleCommand) -> Option<String> {
    if let Some(w) = cmd
        .via
        .iter()
        .find(|v| matches!(v.as_str(), "sudo" | "doas"))
    {
        return Some(format!("runs with raised privileges through `{w}`"));
    }
    if let Some(v) = cmd.assignments.iter().find(|v| loads_code(v)) {
        return Some(format!(
            "sets `{v}`, which can make programs run other code"
        ));
    }
    if let Some(t) = cmd.writes.iter().find(|t| t.starts_with("/dev/")) {
        return Some(format!("writes to the device `{t}`"));
    }
    let words = &cmd.words;
    let name = program_name(words.first()?)?;
    if let Some(why) = flag_danger(cmd, name) {
        return Some(why);
    }
    // Where an option makes the command dangerous, a word only known at run time could be that
    // option: `rm $flags dir` with `flags=-rf`. (After a literal `--`, words are operands.)
    if could_become_dangerous(cmd, name) {
        let word = (1..words.len())
            .find(|&i| cmd.known(i) != Known::Literal)
            .map_or("words appended at run time".to_string(), |i| {
                format!("`{}`", words[i])
            });
        return Some(format!(
            "{word} is only known at run time, where a word that makes `{name}` dangerous could stand"
        ));
    }
    None
}

/// Whether a word only known at run time could make `name` dangerous: for the commands whose
/// danger hangs on an option, one where an option could stand; for those whose danger is a
/// subcommand (`cargo publish`, `systemctl stop`), one in its place. (git's are by
/// subcommand too: see `git_danger`.)
fn could_become_dangerous(cmd: &SimpleCommand, name: &str) -> bool {
    let subcommand_unknown = || match cmd.words.get(1) {
        Some(_) => cmd.known(1) != Known::Literal,
        None => cmd.more_at_run_time,
    };
    match name {
        "rm" | "find" | "chmod" | "chown" | "chgrp" | "kill" | "crontab" => !options_known(cmd),
        "npm" | "pnpm" | "yarn" | "cargo" | "twine" | "gem" | "systemctl" => subcommand_unknown(),
        "docker" | "podman" => {
            subcommand_unknown()
                || (cmd
                    .words
                    .get(1)
                    .is_some_and(|s| s == "system" || s == "volume")
                    && !options_known(cmd))
        }
        _ => false,
    }
}

/// Why `name`, given these words, is dangerous, or `None`.
fn flag_danger(cmd: &SimpleCommand, name: &str) -> Option<String> {
    let words = &cmd.words;
    let why = match name {
        "sudo" | "doas" | "su" | "pkexec" | "runuser" => "raises privileges",
        "rm" if has_flag(words, 'r', &["--recursive"])
            || has_flag(words, 'R', &[])
            || has_flag(words, 'f', &["--force", "--no-preserve-root"]) =>
        {
            "deletes recursively or without asking"
        }
        "find"
            if has_any(
                words,
                &[
                    "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0",
                    "-fprintf", "-fls",
                ],
            ) =>
        {
            "deletes, writes or runs commands on every file it finds"
        }
        "git" => return git_danger(cmd),
        "chmod" | "chown" | "chgrp" if has_flag(words, 'R', &["--recursive"]) => {
            "changes ownership or permissions recursively"
        }
        "dd" | "shred" | "wipefs" | "mkswap" | "fdisk" | "sfdisk" | "parted" | "losetup"
        | "truncate" | "chattr" => "can destroy data in place",
        n if n.starts_with("mkfs") => "creates a file system, destroying what was there",
        "shutdown" | "reboot" | "poweroff" | "halt" | "init" | "telinit" => "stops the machine",
        "killall" | "pkill" => "kills processes by name",
        "kill" if words.iter().skip(1).any(|a| a == "-1") => "kills every process it can",
        "systemctl"
            if !words.get(1).is_some_and(|s| {
                matches!(
                    s.as_str(),
                    "status" | "show" | "cat" | "is-active" | "is-enabled"
                ) || s.starts_with("list-")
            }) =>
        {
            "changes system services"
        }
        "crontab" if has_flag(words, 'r', &[]) => "removes every scheduled job",
        "npm" | "pnpm" | "yarn" | "cargo" | "twine" | "gem"
            if words
                .get(1)
                .is_some_and(|s| s == "publish" || s == "push" || s == "upload") =>
        {
            "publishes a package"
        }
        "docker" | "podman"
            if words.get(1).is_some_and(|s| s == "system" || s == "volume")
                && has_any(words, &["prune", "rm"]) =>
        {
            "deletes containers, images or volumes"
        }
        _ => return None,
    };
    Some(why.to_string())
}

/// Where git's subcommand is, read past git's own options as git reads them (git.c: exact
/// names, no abbreviations; a value in the next word, or after `=` for the long ones). An
/// option it does not know, or one only known at run time, leaves the subcommand unknown:
/// `git --attr-source status rm x` runs `rm`, the word after the value.
fn git_subcommand(cmd: &SimpleCommand) -> Result<Option<usize>, String> {
    let words = &cmd.words;
    let mut i = 1;
    while i < words.len() {
        let a = words[i].as_str();
        if cmd.known(i) != Known::Literal {
            return Err(format!(
                "`git {a}`: the subcommand is only known at run time"
            ));
        }
        if !a.starts_with('-') {
            return Ok(Some(i));
        }
        let (name, attached) = a.split_once('=').map_or((a, false), |(n, _)| (n, true));
        let takes_next = match (name, attached) {
            ("-c" | "--config-env", _) | ("--exec-path", true) => {
                return Err(format!("`git {a}` can make git run any program"));
            }
            (
                "--exec-path"
                | "-p"
                | "--paginate"
                | "-P"
                | "--no-pager"
                | "--no-replace-objects"
                | "--no-lazy-fetch"
                | "--no-optional-locks"
                | "--no-advice"
                | "--bare"
                | "--literal-pathspecs"
                | "--glob-pathspecs"
                | "--noglob-pathspecs"
                | "--icase-pathspecs"
                | "--html-path"
                | "--man-path"
                | "--info-path"
                | "-v"
                | "--version"
                | "-h"
                | "--help",
                false,
            ) => false,
            (
                "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix" | "--attr-source",
                _,
            ) => !attached,
            ("-C", false) => true,
            ("--list-cmds", true) => false,
            _ => return Err(format!("`git {a}` is an option cordon does not know")),
        };
        if takes_next {
            i += 1;
            if cmd.known(i) == Known::Words {
                return Err(format!(
                    "the value of `git {a}` may be several words at run time"
                ));
            }
        }
        i += 1;
    }
    Ok(None)
}

fn git_danger(cmd: &SimpleCommand) -> Option<String> {
    let words = &cmd.words;
    let i = match git_subcommand(cmd) {
        Ok(sub) => sub?,
        Err(why) => return Some(why),
    };
    let args = &words[i..];
    const BY_OPTION: &[&str] = &[
        "push",
        "reset",
        "clean",
        "checkout",
        "restore",
        "branch",
        "stash",
        "reflog",
        "update-ref",
        "gc",
        "config",
    ];
    if BY_OPTION.contains(&args[0].as_str()) && !options_known(cmd) {
        return Some(format!(
            "`git {}` with words only known at run time, where an option that makes it dangerous could stand",
            args[0]
        ));
    }
    let why = match args[0].as_str() {
        "push"
            if has_flag(
                args,
                'f',
                &[
                    "--force",
                    "--force-with-lease",
                    "--force-if-includes",
                    "--mirror",
                    "--delete",
                    "--prune",
                ],
            ) || has_flag(args, 'd', &[])
                || args
                    .iter()
                    .skip(1)
                    .any(|a| a.starts_with('+') || a.starts_with(':')) =>
        {
            "rewrites or deletes history on the remote"
        }
        "reset" if has_any(args, &["--hard", "--merge", "--keep"]) => "discards uncommitted work",
        "clean" if has_flag(args, 'f', &["--force"]) => "deletes untracked files",
        "checkout" if has_any(args, &["--", ".", "-f", "--force"]) => "discards uncommitted work",
        "restore"
            if !has_any(args, &["--staged", "-S"]) || has_any(args, &["--worktree", "-W"]) =>
        {
            "discards uncommitted work"
        }
        "branch"
            if has_flag(args, 'D', &[])
                || (has_any(args, &["--delete", "-d"]) && has_flag(args, 'f', &["--force"])) =>
        {
            "deletes a branch that may not be merged"
        }
        "stash" if args.get(1).is_some_and(|s| s == "drop" || s == "clear") => {
            "deletes stashed work"
        }
        "filter-branch" | "filter-repo" => "rewrites history",
        "reflog" if args.get(1).is_some_and(|s| s == "expire" || s == "delete") => {
            "deletes the record of where branches were"
        }
        "update-ref" if has_flag(args, 'd', &[]) => "deletes a ref",
        "gc" if args.iter().any(|a| a.starts_with("--prune")) => "deletes unreachable objects",
        "config"
            if args.iter().skip(1).any(|a| {
                [
                    "core.",
                    "alias.",
                    "credential.",
                    "url.",
                    "include",
                    "filter.",
                    "diff.",
                    "merge.",
                    "gpg.",
                    "protocol.",
                    "uploadpack.",
                    "receive.",
                ]
                .iter()
                .any(|p| a.to_ascii_lowercase().starts_with(p))
            }) =>
        {
            "sets git configuration that can run programs"
        }
        _ => return None,
    };
    Some(why.to_string())
}

/// Variables a read-only command may be given: they change how output looks, never what
/// runs or where anything is written. Any other variable may make some tool read a config
/// file or load code (`RIPGREP_CONFIG_PATH`, `LESSOPEN`, `GIT_CONFIG_*`, `MAKEFLAGS`) or write
/// elsewhere (`TMPDIR` for sort's temporary files), so none is trusted to be harmless.
fn only_changes_output(var: &str) -> bool {
    matches!(
        var,
        "LANG"
            | "LANGUAGE"
            | "TZ"
            | "TERM"
            | "COLUMNS"
            | "LINES"
            | "NO_COLOR"
            | "CLICOLOR"
            | "CLICOLOR_FORCE"
            | "FORCE_COLOR"
            | "GREP_COLOR"
            | "GREP_COLORS"
            | "LS_COLORS"
            | "TIME_STYLE"
            | "QUOTING_STYLE"
            | "TABSIZE"
            | "BLOCK_SIZE"
            | "BLOCKSIZE"
            | "DF_BLOCK_SIZE"
            | "DU_BLOCK_SIZE"
            | "LS_BLOCK_SIZE"
            | "POSIXLY_CORRECT"
    ) || var.starts_with("LC_")
}

/// Read-only commands none of whose options writes a file, runs a program or reaches the
/// network: any argument will do, whether it is known before the run or not.
const ANY_ARGUMENTS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "which",
    "whoami",
    "id",
    "uname",
    "stat",
    "du",
    "df",
    "diff",
    "cmp",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "true",
    "false",
    "cut",
    "tr",
    "nl",
    "comm",
    "printenv",
    "grep",
    "egrep",
    "fgrep",
    "column",
    "od",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "jq",
    "type",
    "whereis",
];

/// Whether every word where an option could stand is known: all of them up to a literal
/// `--`, and no arguments appended at run time. A word only known at run time could be
/// `--output=F` (or, unquoted, several options).
fn options_known(cmd: &SimpleCommand) -> bool {
    let end = (1..cmd.words.len())
        .find(|&i| cmd.words[i] == "--" && cmd.known(i) == Known::Literal)
        .unwrap_or(cmd.words.len());
    !cmd.more_at_run_time && (1..end).all(|i| cmd.known(i) == Known::Literal)
}

/// `printf` reads options only before its format (bash's builtin); `-v` assigns. Any word
/// after a literal format is only data.
fn printf_is_static(cmd: &SimpleCommand) -> bool {
    let first_is_format = cmd.known(1) == Known::Literal
        && cmd
            .words
            .get(1)
            .is_some_and(|f| f == "--" || !f.starts_with('-'));
    !cmd.more_at_run_time && (cmd.is_literal() || first_is_format)
}

/// `test` and `[` choose how to read each argument by its place and its text: a word only
/// known at run time could become `-v`, which evaluates the next word's array index. Such a
/// word is trusted only as the operand of a literal operator: right after a unary one (not
/// `-v` or `-R`), or on either side of a binary one.
fn test_is_static(cmd: &SimpleCommand) -> bool {
    const UNARY: &[&str] = &[
        "-a", "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t", "-u", "-w",
        "-x", "-G", "-L", "-N", "-O", "-S", "-z", "-n", "-o",
    ];
    const BINARY: &[&str] = &[
        "=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef",
    ];
    let literal = |i: usize, set: &[&str]| {
        cmd.known(i) == Known::Literal
            && cmd.words.get(i).is_some_and(|w| set.contains(&w.as_str()))
    };
    !cmd.more_at_run_time
        && (1..cmd.words.len()).all(|i| match cmd.known(i) {
            Known::Literal => true,
            Known::Words => false,
            Known::OneWord => {
                literal(i - 1, UNARY) || literal(i - 1, BINARY) || literal(i + 1, BINARY)
            }
        })
}

/// uniq's options (coreutils): with a second operand it writes that file.
const UNIQ: Options = Options {
    short: "cdDf:is:uw:z",
    long: &[
        ("count", Arg::No),
        ("repeated", Arg::No),
        ("all-repeated", Arg::Optional),
        ("skip-fields", Arg::Required),
        ("ignore-case", Arg::No),
        ("skip-chars", Arg::Required),
        ("unique", Arg::No),
        ("zero-terminated", Arg::No),
        ("check-chars", Arg::Required),
        ("group", Arg::Optional),
        ("help", Arg::No),
        ("version", Arg::No),
    ],
    numeric: true,
    permute: true,
};

/// True for commands known to only read (and not to run other programs).
pub fn is_read_only(cmd: &SimpleCommand) -> bool {
    if !cmd.writes.is_empty()
        || !cmd.assignments.iter().all(|v| only_changes_output(v))
        || cmd.via.iter().any(|v| v == "sudo" || v == "doas")
    {
        return false;
    }
    let words = &cmd.words;
    let Some(name) = words.first().and_then(|w| program_name(w)) else {
        return false;
    };
    if ANY_ARGUMENTS.contains(&name) {
        return true;
    }
    match name {
        "printf" => return printf_is_static(cmd),
        "test" | "[" => return test_is_static(cmd),
        // find takes no `--`: a word known only at run time could be `-delete`.
        "find" if !cmd.is_literal() => return false,
        _ if !options_known(cmd) => return false,
        _ => {}
    }
    match name {
        "env" => words.len() == 1,
        // --compress-program runs a program on temporary files, which -T puts anywhere.
        "sort" => {
            !has_flag(words, 'o', &["--output", "--compress-program"])
                && !has_flag(words, 'T', &["--temporary-directory"])
        }
        "uniq" => getopt::read(words, &cmd.known, 1, &UNIQ).is_ok_and(|f| f.operands.len() <= 1),
        "date" => !has_flag(words, 's', &["--set"]),
        "hostname" => words.len() == 1,
        // -C compiles a magic file, writing NAME.mgc.
        "file" => !has_flag(words, 'C', &["--compile"]),
        // -R runs tree again in each directory with `-o 00Tree.html`.
        "tree" => !has_flag(words, 'o', &[]) && !has_flag(words, 'R', &[]),
        // clap takes no abbreviations, but --pre-glob and the like come with --pre.
        // --hostname-bin (ripgrep 14) runs a program to name the host in hyperlinks.
        "rg" => !words
            .iter()
            .any(|a| a.starts_with("--pre") || a.starts_with("--hostname-bin")),
        "find" => !has_any(
            words,
            &[
                "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf",
                "-fls",
            ],
        ),
        "git" => git_read_only(cmd),
        _ => false,
    }
}

/// Whether `dir`, as written, names a directory under the working directory: relative, not
/// the home directory's, and no `..` on the way.
fn stays_here(dir: &str) -> bool {
    !dir.is_empty()
        && !dir.starts_with(['/', '~'])
        && std::path::Path::new(dir)
            .components()
            .all(|c| !matches!(c, std::path::Component::ParentDir))
}

fn git_read_only(cmd: &SimpleCommand) -> bool {
    let Ok(Some(i)) = git_subcommand(cmd) else {
        return false;
    };
    // Pointed at another repository (`-C DIR`, `--git-dir`, `--work-tree`), git loads that
    // repository's config, whose `core.fsmonitor`, `diff.external` or pager run a program
    // even for `status`. Only repositories in the working directory are ones cordon checks
    // (their config and hooks read-only in the sandbox, what runs programs taken out after
    // every run), so the directory must be written out, relative, and never climb out with
    // `..`. `--bare` takes the working directory itself for a repository, reading a file
    // named `config` there as git's config: never.
    let global = &cmd.words[1..i];
    let mut j = 0;
    while j < global.len() {
        let a = global[j].as_str();
        let (name, attached) = a.split_once('=').map_or((a, None), |(n, v)| (n, Some(v)));
        let takes_dir = matches!(name, "-C" | "--git-dir" | "--work-tree");
        if name == "--bare" {
            return false;
        }
        if takes_dir {
            let (dir, at) = match attached {
                Some(v) => (v, j + 1),
                None => (global.get(j + 1).map_or("", String::as_str), j + 2),
            };
            if !stays_here(dir) || cmd.known(at) != Known::Literal {
                return false;
            }
            if attached.is_none() {
                j += 1;
            }
        }
        j += 1;
    }
    let args = &cmd.words[i..];
    // Writing a file, running an external diff, text-conversion or filter program, or opening
    // files in a pager (git grep -O), in every spelling git's option parser takes.
    let runs_or_writes = [
        "--output",
        "--ext-diff",
        "--textconv",
        "--filters",
        "--open-files-in-pager",
    ];
    if has_long(args, &runs_or_writes)
        || (args[0] == "grep" && short_flags(args).any(|f| f.contains('O')))
    {
        return false;
    }
    let listing_only =
        |allowed: &[&str]| args.iter().skip(1).all(|a| allowed.contains(&a.as_str()));
    match args[0].as_str() {
        "status" | "log" | "diff" | "show" | "blame" | "rev-parse" | "ls-files" | "ls-tree"
        | "describe" | "shortlog" | "cat-file" | "merge-base" | "rev-list" | "name-rev"
        | "count-objects" | "version" | "grep" => true,
        "branch" => listing_only(&[
            "-a",
            "-r",
            "-v",
            "-vv",
            "--list",
            "--show-current",
            "--all",
            "--remotes",
        ]),
        "remote" => listing_only(&["-v", "--verbose"]),
        "tag" => listing_only(&["-l", "--list"]),
        "stash" | "worktree" => args.get(1).is_some_and(|s| s == "list"),
        "config" => args
            .iter()
            .skip(1)
            .any(|a| matches!(a.as_str(), "--get" | "--get-all" | "--list" | "-l")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::shell::{Role, analyse};

    fn first(script: &str) -> crate::shell::SimpleCommand {
        analyse(script)
            .commands
            .into_iter()
            .find(|c| c.role == Role::Runs)
            .expect("a command")
    }

    #[test]
    fn dangerous_commands() {
        for s in [
            "rm -rf build",
            "rm -r x",
            "rm -f x",
            "rm --recursive x",
            "rm -R x",
            "find . -delete",
            "find . -exec rm {} +",
            "git push --force",
            "git push -f origin",
            "git push origin +main",
            "git push origin :main",
            "git reset --hard HEAD~1",
            "git clean -fdx",
            "git checkout -- .",
            "git branch -D x",
            "git stash clear",
            "git -c core.pager=sh log",
            "chmod -R 777 .",
            "dd if=/dev/zero of=x",
            "PATH=/tmp ls",
            "LD_PRELOAD=x.so ls",
            "sudo ls",
            "echo x > /dev/sda",
            "git config core.hooksPath .hooks",
            "mkfs.ext4 /dev/x",
            "npm publish",
        ] {
            assert!(super::danger(&first(s)).is_some(), "{s}");
        }
        for s in [
            "rm x",
            "git push",
            "git status",
            "ls -la",
            "find . -name x",
            "LANG=C ls",
        ] {
            assert!(super::danger(&first(s)).is_none(), "{s}");
        }
    }

    #[test]
    fn read_only_commands() {
        for s in [
            "ls -la",
            "git status",
            "git log --oneline",
            "git diff HEAD",
            "cat README.md",
            "grep -rn foo src",
            "find . -name '*.rs'",
            "git branch",
            "wc -l x",
            "sort -S 16K x",
            "sort --check x",
            "file x",
            "git grep -n x",
            "git -C sub log -1",
            "git --no-pager -C sub/deeper status",
            "git --git-dir=sub/.git --work-tree=sub status",
        ] {
            assert!(super::is_read_only(&first(s)), "{s}");
        }
        for s in [
            "ls > out",
            "sort -o x y",
            "git branch -D x",
            "find . -delete",
            "git commit",
            "./ls",
            "git diff --output=x",
            "rg --pre sh x",
            "uniq a b",
            "PATH=/x ls",
            "git -c core.pager=sh log",
            "sort -S 16K --compress-program=sh",
            "sort -T /tmp x",
            "sort --temporary-d=/tmp x",
            "rg --hostname-bin=sh x",
            "sort --compress-p=sh x",
            "sort --outp=x y",
            "sort --o=x y",
            "git grep --open-files-in-pager=sh x",
            "git grep --open=sh x",
            "git grep -O x",
            "git grep -Osh x",
            "git grep -nOsh x",
            "git log --outp=x",
            "git diff --ext-d",
            "git diff --textconv",
            "git cat-file --filters HEAD:x",
            "RIPGREP_CONFIG_PATH=/dev/stdin rg x",
            "GIT_CONFIG_COUNT=1 git log",
            "LESSOPEN='|sh %s' cat x",
            "BASH_FUNC_ls%%='() { rm x; }' ls",
            "GCONV_PATH=. cat x",
            "file -C -m x",
            "file --comp -m x",
            "tree -R",
            // Wrapper options read as getopt reads them: `-I` takes `cat`, so sort runs.
            "xargs -0I cat sort --outp=F",
            "xargs -0 -I cat sort --outp=F",
            "git --attr-source status rm x",
            "git --attr-source=HEAD rm x",
            "git --unknown-option status",
            "git -C ../other status",
            "git -C /tmp/x diff",
            "git -C ~/x diff",
            "git -C sub/../../x diff",
            "git -C \"$d\" status",
            "git --git-dir=../other/.git status",
            "git --git-dir ../other/.git log",
            "git --work-tree=../other status",
            "git --work-tree ../other diff",
            "git --bare log",
            "uniq - out",
            "uniq -f 1 in out",
            "uniq -2 in out",
            "TMPDIR=/x sort a",
            "MAKEFLAGS=x ls",
            "GIT_PAGER=x git log",
        ] {
            assert!(!super::is_read_only(&first(s)), "{s}");
        }
    }

    /// A word only known at run time could be any option: `$x` may hold `--output=F`, and
    /// unquoted it may be several words.
    #[test]
    fn words_known_only_at_run_time_could_be_options() {
        for s in [
            "sort $x",
            "sort \"$x\" a",
            "sort *",
            "sort a \"$(cat opts)\"",
            "for f in *; do sort $f; done",
            "ls | xargs sort",
            "ls | xargs -n1 git log",
            "uniq $x",
            "uniq a \"$x\"",
            "git log $x",
            "git $sub",
            "git -C \"$d\" log $x",
            "rg foo $dir",
            "tree $x",
            "file $x",
            "date $x",
            "find $dir -name x",
            "find . -exec sort {} ;",
            "printf $x",
            "printf \"$fmt\" a",
            "test $x",
            "test \"$x\" \"$y\"",
            "[ \"$op\" a ]",
            "[ -n $x ]",
            "env $x",
        ] {
            let a = crate::shell::analyse(s);
            let all_read_only = a
                .commands
                .iter()
                .filter(|c| c.role == Role::Runs)
                .all(super::is_read_only);
            assert!(!(a.is_analysable() && all_read_only), "{s}");
        }
        for s in [
            "cat $f",
            "grep -rn \"$x\" src",
            "ls *.rs",
            "[ -f \"$f\" ]",
            "test \"$a\" = \"$b\"",
            "[ \"$a\" != x -a -n \"$b\" ]",
            "printf '%s\\n' $x",
            "printf -- \"$x\"",
            "git log -- $path",
            "git -C sub log",
            "git --no-pager log -1",
            "git --git-dir=.git status",
            "sort -- $x",
            "LANG=C sort a",
            "LC_ALL=C uniq -c a",
            "uniq - ",
            "uniq -f 1 a",
            "echo ${a[0]} ${s:1:2}",
            "test -v x",
        ] {
            let a = crate::shell::analyse(s);
            assert!(a.is_analysable(), "{s}: {:?}", a.problems);
            for c in a.commands.iter().filter(|c| c.role == Role::Runs) {
                assert!(super::is_read_only(c), "{s}: {}", c.text);
            }
        }
    }

    #[test]
    fn a_git_option_cordon_does_not_know_is_dangerous() {
        for s in [
            "git --attr-source main push --force",
            "git --frobnicate push",
            "git $x",
            "git -c core.pager=sh log",
            "git --exec-path=/tmp log",
        ] {
            assert!(super::danger(&first(s)).is_some(), "{s}");
        }
        // A word only known at run time where a dangerous option could stand.
        for s in [
            "rm $flags build",
            "rm \"$f\"",
            "rm *",
            "git push origin $branch",
            "git push \"$@\"",
            "git reset $mode",
            "find $dir -name x",
            "chmod $opts 644 x",
            "kill $pid",
            "ls | xargs rm",
            "cargo $cmd",
            "docker system $what",
            "ls | xargs systemctl",
        ] {
            let a = analyse(s);
            assert!(
                a.commands
                    .iter()
                    .filter(|c| c.role == Role::Runs)
                    .any(|c| super::danger(c).is_some()),
                "{s}"
            );
        }
        for s in [
            "rm -- \"$f\"",
            "git log $x",
            "git status $x",
            "cat $f",
            "kill -- 1234",
            "cargo test $name",
            "docker run $image",
            "systemctl status $unit",
        ] {
            assert!(super::danger(&first(s)).is_none(), "{s}");
        }
        assert!(super::danger(&first("git --no-pager -C x log")).is_none());
        assert!(super::danger(&first("git --exec-path")).is_none());
    }
}
