//! The shell that runs a command line cordon decided.
//!
//! The policy reads a command line with bash's grammar (brush-parser). Where another shell ran
//! it, what was decided would not be what runs: `cat f &>/dev/null rm -f g` is one harmless
//! `cat` to bash and a background `cat` then `rm -f g` to dash, Debian's `/bin/sh`. So every
//! command line cordon decided is run by bash, started by an absolute path found once (never
//! through `PATH`, which a workspace may lead), reading no start-up file and no code from the
//! environment. Where no bash is installed, such a command line is refused rather than handed
//! to another shell.

use std::path::Path;
use std::sync::OnceLock;

/// Where bash is looked for, in order: the first that is an executable file is the one.
pub const BASH_PATHS: &[&str] = &[
    "/bin/bash",
    "/usr/bin/bash",
    "/usr/local/bin/bash",
    "/opt/homebrew/bin/bash",
];

/// `--noprofile --norc`: no start-up file of the user's or the system's is read, whatever the
/// shell would otherwise read when it thinks it is a login or interactive shell.
const NO_START_UP_FILES: [&str; 2] = ["--noprofile", "--norc"];

/// Whether a variable makes bash (or sh) run code or change how it reads a script before the
/// script's first word: `BASH_ENV` and `ENV` name a file to source, `SHELLOPTS` and
/// `BASHOPTS` set options (`SHELLOPTS=xtrace` with `PS4` runs a command substitution), and
/// `BASH_FUNC_name%%` defines a function that takes the place of the command `name`. None
/// passes to the shell that runs a decided command line.
pub fn changes_the_shell(name: &str) -> bool {
    matches!(name, "BASH_ENV" | "ENV" | "SHELLOPTS" | "BASHOPTS") || name.starts_with("BASH_FUNC_")
}

/// This machine's bash, found once.
pub fn host_bash() -> Option<&'static Path> {
    static FOUND: OnceLock<Option<&'static Path>> = OnceLock::new();
    *FOUND.get_or_init(|| {
        BASH_PATHS
            .iter()
            .map(Path::new)
            .find(|p| is_executable_file(p))
    })
}

fn is_executable_file(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// No bash where a decided command line would run.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "bash is not installed here (looked for {}): cordon decides shell commands with bash's grammar and runs them only with bash, never with another shell; install bash, or run a program directly with `cordon run -- PROGRAM ARGS…`",
    BASH_PATHS.join(", ")
)]
pub struct NoBash;

/// The program and arguments that run `script` with this machine's bash.
pub fn host_argv(script: &str) -> Result<Vec<String>, NoBash> {
    let bash = host_bash().ok_or(NoBash)?;
    Ok(bash_argv(&bash.to_string_lossy(), script))
}

fn bash_argv(bash: &str, script: &str) -> Vec<String> {
    let mut argv = vec![bash.to_string()];
    argv.extend(NO_START_UP_FILES.map(String::from));
    argv.extend(["-c".to_string(), script.to_string()]);
    argv
}

/// The name the finder in [`image_argv`] runs as (its `$0`), shown in its messages.
const FINDER_NAME: &str = "cordon-bash";

/// The program and arguments that run `script` with the bash of an image cordon cannot look
/// into before it runs (a container's, a pod's): a fixed POSIX script that looks for bash at
/// [`BASH_PATHS`] and hands it the command line as an argument, so `sh` never reads it;
/// without bash it says so and exits 127. (`BASH_ENV` and `ENV` the image may set are
/// dropped; cordon passes none of [`changes_the_shell`]'s variables in.)
pub fn image_argv(script: &str) -> Vec<String> {
    let candidates: Vec<&str> = BASH_PATHS
        .iter()
        .copied()
        .filter(|p| !p.starts_with("/opt/"))
        .collect();
    let finder = format!(
        "unset BASH_ENV ENV; for b in {}; do if [ -f \"$b\" ] && [ -x \"$b\" ]; then exec \"$b\" {} -c \"$1\"; fi; done; \
         echo \"cordon: this image has no bash (looked for {}): cordon runs the shell commands it decided only with bash; add bash to the image, or run a program directly\" >&2; exit 127",
        candidates.join(" "),
        NO_START_UP_FILES.join(" "),
        candidates.join(", "),
    );
    vec![
        "/bin/sh".into(),
        "-c".into(),
        finder,
        FINDER_NAME.into(),
        script.into(),
    ]
}

/// The command line inside an argv made by [`host_argv`] or [`image_argv`], if it is one.
pub fn script_of(argv: &[String]) -> Option<&str> {
    match argv {
        [bash, no_profile, no_rc, c, script]
            if BASH_PATHS.contains(&bash.as_str())
                && [no_profile.as_str(), no_rc.as_str()] == NO_START_UP_FILES
                && c == "-c" =>
        {
            Some(script)
        }
        [sh, c, _, name, script] if sh == "/bin/sh" && c == "-c" && name == FINDER_NAME => {
            Some(script)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_that_run_code_in_bash_are_named() {
        for name in ["BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "BASH_FUNC_ls%%"] {
            assert!(changes_the_shell(name), "{name}");
        }
        for name in ["PATH", "HOME", "BASH", "ENVIRONMENT", "PS4"] {
            assert!(!changes_the_shell(name), "{name}");
        }
    }

    #[test]
    fn both_forms_give_back_the_command_line() {
        let script = "echo 'a b' && rm -f \"$x\"";
        assert_eq!(script_of(&bash_argv("/bin/bash", script)), Some(script));
        assert_eq!(script_of(&image_argv(script)), Some(script));
        let other = ["/bin/sh", "-c", script].map(String::from);
        assert_eq!(script_of(&other), None);
    }

    /// The finder is run by whatever `/bin/sh` an image has: here by this machine's, with and
    /// without a bash among its candidates (the script given as an argument, never read by sh).
    #[cfg(unix)]
    #[test]
    fn the_image_finder_runs_bash_or_says_there_is_none() {
        if host_bash().is_none() {
            let why = "skipped: no bash on this machine";
            assert!(std::env::var_os("CORDON_TEST_NO_SKIP").is_none(), "{why}");
            eprintln!("{why}");
            return;
        }
        // dash would run `rm` here; bash reads one `cat` with its output redirected.
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("f"), "x").expect("write");
        let argv = image_argv("cat missing &>/dev/null rm -f f; echo $BASH_VERSION");
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(dir.path())
            .env("BASH_ENV", "/nonexistent-so-that-bash-would-complain")
            .output()
            .expect("sh runs");
        assert!(
            dir.path().join("f").exists(),
            "the finder ran the line with sh"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.trim().is_empty(), "not bash: {stdout:?}");
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        let none: Vec<String> = {
            let mut a = image_argv("echo ran");
            a[2] = a[2].replace(
                "/bin/bash /usr/bin/bash /usr/local/bin/bash",
                "/nonexistent/bash",
            );
            a
        };
        let out = std::process::Command::new(&none[0])
            .args(&none[1..])
            .output()
            .expect("sh runs");
        assert_eq!(out.status.code(), Some(127));
        assert!(out.stdout.is_empty());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("this image has no bash"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
