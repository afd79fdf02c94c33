//! How cordon and a pod with a copied working directory ([`super::Workspace::Copied`]) take
//! turns, through marker files in a small volume both of the pod's containers mount at [`DIR`]:
//!
//! 1. The command's container waits for [`GO`] before it starts the command, so that cordon
//!    can attach to its input and output first and copy the working directory in.
//! 2. cordon runs [`copy_in`] in the [`CONTAINER`]: the working directory arrives as a tar
//!    stream on its input, after its length, then `GO` is made.
//! 3. When the command ends, its container writes the command's status to [`EXIT`] and ends
//!    with it. cordon reads it there ([`read_exit`]): a kubelet may be slow to report one
//!    container's end while another of the pod still runs.
//! 4. cordon runs [`copy_back`] in the `CONTAINER`, which sends the working directory back as
//!    a tar stream, then deletes the pod.
//!
//! Every wait is bounded, so that a pod whose cordon was killed ends by itself: the command's
//! container gives up after [`START_WITHIN_SECS`] without `GO` (status 125), and the copying
//! container ends [`COPY_BACK_WITHIN_SECS`] after `EXIT` unless a copy back has begun (a copy
//! back whose reader is gone ends on a broken pipe). The cluster's own deadline
//! (`shutdownTime`, `activeDeadlineSeconds`) bounds the command.
//!
//! The image needs `/bin/sh`, `tar`, `head -c` and a `sleep` that takes fractions (busybox and
//! coreutils all do). Nothing the pod sends back is trusted: the command can write the marker files
//! too, which at worst ends its own pod early.

/// The volume (after the run's name) and where both containers mount it.
pub const VOLUME: &str = "cordon";
pub const DIR: &str = "/run/cordon";
/// The container that runs the command.
pub const RUN_CONTAINER: &str = "run";
/// The container that holds the working directory for the copies.
pub const CONTAINER: &str = "workspace";
/// The copying container's `PATH`: the image's own may be unset.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
pub const GO: &str = "/run/cordon/go";
pub const EXIT: &str = "/run/cordon/exit";
/// How long the command waits for its working directory.
pub const START_WITHIN_SECS: u32 = 600;
/// How long the copying container waits for a copy back to begin once the command has ended.
pub const COPY_BACK_WITHIN_SECS: u32 = 30;
/// The status of a command that never started because its working directory never came.
pub const NEVER_STARTED: u8 = 125;

/// The gate: wait for `GO`, run the arguments, leave `EXIT`.
fn gate() -> String {
    let tenths = START_WITHIN_SECS * 10;
    format!(
        "i=0
while [ ! -e {GO} ]; do
  i=$((i+1))
  if [ \"$i\" -gt {tenths} ]; then
    echo 'cordon: the working directory was not copied in within {START_WITHIN_SECS} s' >&2
    echo {NEVER_STARTED} > {EXIT}
    exit {NEVER_STARTED}
  fi
  sleep 0.1
done
\"$@\"
s=$?
echo \"$s\" > {EXIT}
exit \"$s\""
    )
}

/// The name the gate runs under (`$0`).
const GATE_NAME: &str = "cordon-run";

/// The command's container's command: wait for `GO`, run `argv`, leave `EXIT`.
pub fn gated(argv: &[String]) -> Vec<String> {
    let mut out = vec!["/bin/sh".to_string(), "-c".into(), gate(), GATE_NAME.into()];
    out.extend(argv.iter().cloned());
    out
}

/// Whether `cmdline` (a process's arguments) is the gate running `program`: how `cordon mcp`'s
/// worker knows it is the command of one of cordon's pods, whose first process the gate is.
pub fn is_gate(cmdline: &[String], program: &[&str]) -> bool {
    let gate = gated(&program.iter().map(|a| a.to_string()).collect::<Vec<_>>());
    cmdline == gate.as_slice()
}

/// The copying container's command: hold the working directory until the command has ended
/// and the copy back is done, or did not begin in time.
pub fn holder() -> Vec<String> {
    let tenths = COPY_BACK_WITHIN_SECS * 10;
    let script = format!(
        "while [ ! -e {EXIT} ]; do sleep 0.1; done
i=0
while [ ! -e {DIR}/copying ] && [ \"$i\" -lt {tenths} ]; do i=$((i+1)); sleep 0.1; done
while [ -e {DIR}/copying ] && [ ! -e {DIR}/copied ]; do sleep 0.1; done"
    );
    vec!["/bin/sh".into(), "-c".into(), script]
}

/// What cordon runs in the copying container to copy the working directory `cwd` in: a line
/// with the tar stream's length in bytes, then the stream, unpacked there; then the command may
/// start. Reading exactly that length, it ends by itself: before Kubernetes 1.30 an exec's
/// input cannot be closed without closing its output and status too.
pub fn copy_in(cwd: &str) -> Vec<String> {
    let script = format!(
        "IFS= read -r n || exit 1
case $n in ''|*[!0-9]*) echo \"cordon: not a length: $n\" >&2; exit 1 ;; esac
head -c \"$n\" | tar -x -f - -C \"$1\" && : > {GO}"
    );
    vec![
        "/bin/sh".into(),
        "-c".into(),
        script,
        "cordon-copy-in".into(),
        cwd.into(),
    ]
}

/// What [`copy_in`] reads before an archive of `length` bytes.
pub fn length_line(length: u64) -> String {
    format!("{length}\n")
}

/// What cordon runs in the copying container to read the command's exit status, once the
/// command has ended: the number alone, or nothing while it runs. The command could have
/// written the file too, but the gate writes it last, and the status is the command's to
/// choose anyway.
pub fn read_exit() -> Vec<String> {
    let script = format!("head -c 16 {EXIT} 2>/dev/null || true");
    vec!["/bin/sh".into(), "-c".into(), script]
}

/// What cordon runs in the copying container to have the working directory `cwd` back, as a
/// tar stream on its output, once the command has ended.
pub fn copy_back(cwd: &str) -> Vec<String> {
    let script = format!(
        ": > {DIR}/copying
tar -c -f - -C \"$1\" .
s=$?
: > {DIR}/copied
exit \"$s\""
    );
    vec![
        "/bin/sh".into(),
        "-c".into(),
        script,
        "cordon-copy-back".into(),
        cwd.into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_is_known_by_its_whole_command_line() {
        let line = gated(&["cordon".into(), "mcp".into(), "--worker".into()]);
        assert!(is_gate(&line, &["cordon", "mcp", "--worker"]));
        assert!(!is_gate(&line, &["cordon", "mcp"]));
        let mut other = line.clone();
        other[2] = "sleep 1; \"$@\"".into();
        assert!(!is_gate(&other, &["cordon", "mcp", "--worker"]));
    }
}
