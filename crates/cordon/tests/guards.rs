//! What a run plants is undone whatever kills cordon, and whatever other run goes on beside it.
//!
//! Each test has a workspace under /var/tmp (where `exec` runs warm) and a state directory of
//! its own (`XDG_STATE_HOME`), so that one test's sweep of cordon's guard journal never takes
//! another's leftovers. The attempts:
//! - every process of `cordon exec`'s session killed at once, and the whole process tree of a
//!   cold run: the next cordon in that directory, or `cordon doctor`, undoes what was planted
//!   and says so;
//! - runs side by side in one directory, the planting one ending first or last, two and three
//!   of them, cold and warm: what any of them planted is gone once the last has ended;
//! - the same for an agent's settings under `run --agent`: two runs of one agent, each planting
//!   a hook, and one killed with its whole tree;
//! - a process the command leaves behind, planting in a loop: nothing is left once cordon has
//!   answered, cold and warm.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use common::{cordon_bin, stderr};
use serde_json::{Value, json};

/// Long enough for a loaded CI machine; only reached when cordon is broken.
const PATIENCE: Duration = Duration::from_secs(120);

/// What the attempts plant: files that make the next shell, editor or git run something.
const PLANTED: [&str; 3] = [".bashrc", ".vscode/tasks.json", "sub/.git/hooks/pre-commit"];

/// Plants [`PLANTED`] (in a repository the command makes), then says `planted`. The editor's
/// directory is named at run time: written out, exec's policy refuses the line in every mode
/// (it is a control file), and these attempts are on the guards.
const PLANT: &str = "v=.vscode; mkdir -p $v sub/.git/hooks sub/.git/objects sub/.git/refs; \
     echo 'ref: refs/heads/main' > sub/.git/HEAD; echo '{}' > $v/tasks.json; \
     echo evil > sub/.git/hooks/pre-commit; echo evil > .bashrc; echo planted";

struct Place {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    state: PathBuf,
}

impl Place {
    /// Skips the test where this machine cannot run sandboxes.
    fn new() -> Place {
        let tmp = tempfile::tempdir_in("/var/tmp").expect("temp dir");
        let ws = tmp.path().join("ws");
        let state = tmp.path().join("state");
        std::fs::create_dir_all(&ws).expect("mkdir");
        let p = Place {
            _tmp: tmp,
            ws,
            state,
        };
        let probe = p.cordon(&["run", "--", "true"]).output().expect("cordon");
        if !probe.status.success() {
            common::skip(format!(
                "cordon run -- true failed here: {}",
                stderr(&probe)
            ));
        }
        p
    }

    fn cordon(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(cordon_bin());
        cmd.args(args)
            .current_dir(&self.ws)
            .env("XDG_STATE_HOME", &self.state)
            .stdin(Stdio::null());
        cmd
    }

    fn planted(&self) -> Vec<&'static str> {
        PLANTED
            .into_iter()
            .filter(|p| std::fs::symlink_metadata(self.ws.join(p)).is_ok())
            .collect()
    }

    /// Every cordon process is gone: nothing is left to undo, and the plants stay (the tests
    /// need them to, to show who undoes them).
    fn all_planted_after_a_while(&self) {
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            self.planted(),
            PLANTED,
            "something undid the plants with every cordon process killed"
        );
    }

    fn wait_for(&self, name: &str) {
        let give_up = Instant::now() + PATIENCE;
        while !self.ws.join(name).exists() {
            assert!(Instant::now() < give_up, "{name} never came");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `cordon exec --jsonl` in `place`, started with `pre` (`setsid` for a session of its own).
struct Exec {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Receiver<Value>,
}

impl Exec {
    fn start(place: &Place, env: &[(&str, &str)], own_session: bool) -> Exec {
        let mut cmd = if own_session {
            let mut c = Command::new("setsid");
            c.arg(cordon_bin());
            c
        } else {
            Command::new(cordon_bin())
        };
        let mut child = cmd
            .args(["exec", "--jsonl", "--mode", "yolo"])
            .current_dir(&place.ws)
            .env("XDG_STATE_HOME", &place.state)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cordon exec");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, events) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        Exec {
            stdin: child.stdin.take(),
            child,
            events,
        }
    }

    fn run(&mut self, id: &str, command: &str) {
        let request = json!({"type": "run", "id": id, "command": command});
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{request}").expect("send");
        stdin.flush().expect("flush");
    }

    /// The next event of `kind` for `id` (others are dropped).
    fn wait(&mut self, kind: &str, id: &str) -> Value {
        let give_up = Instant::now() + PATIENCE;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            let v = self
                .events
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {kind} event for {id}"));
            if v["type"] == kind && v["id"] == id {
                return v;
            }
        }
    }

    /// Waits until `id` has written `text`.
    fn wait_output(&mut self, id: &str, text: &str) {
        let mut seen = String::new();
        while !seen.contains(text) {
            seen.push_str(self.wait("output", id)["data"].as_str().unwrap_or_default());
        }
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every process as (pid, parent, session), from `/proc/PID/stat`.
fn processes() -> Vec<(u32, u32, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // The fields after the command name, which is in parentheses and may hold spaces:
        // state, parent, process group, session.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let field = |n: usize| rest.split_whitespace().nth(n).and_then(|f| f.parse().ok());
        if let (Some(ppid), Some(sid)) = (field(1), field(3)) {
            out.push((pid, ppid, sid));
        }
    }
    out
}

/// Every process whose parent chain leads to `root`, `root` first.
fn tree(root: u32) -> Vec<u32> {
    let all = processes();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(all.iter().filter(|(_, pp, _)| *pp == p).map(|(c, _, _)| *c));
        i += 1;
    }
    out
}

/// The processes of session `sid`.
fn session_members(sid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|(_, _, s)| *s == sid)
        .map(|(p, _, _)| p)
        .collect()
}

fn signal(sig: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .args(pids.iter().map(u32::to_string))
        .status();
}

fn gone(pids: &[u32]) -> bool {
    pids.iter()
        .all(|p| !Path::new(&format!("/proc/{p}")).exists() || is_zombie(*p))
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// Kills `pids` at once (stopped first, so that none acts on the others' deaths) and waits
/// until they are gone.
fn kill_all(pids: &[u32]) {
    signal("STOP", pids);
    signal("KILL", pids);
    let give_up = Instant::now() + PATIENCE;
    while !gone(pids) {
        assert!(Instant::now() < give_up, "processes outlived SIGKILL");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A warm command plants and sleeps; SIGKILL reaches every process of `cordon exec`'s session
/// at once (exec and the warm sandbox's helper: what a closing terminal or an agent's
/// supervisor does). Nothing of cordon is left to undo; the next `cordon run` in the
/// directory does, and says so.
fn a_killed_session_leaves_nothing_once_cordon_runs_there_again() {
    let place = Place::new();
    let mut exec = Exec::start(&place, &[], true);
    exec.run("plant", &format!("{PLANT}; exec sleep 876542"));
    exec.wait_output("plant", "planted");
    // `setsid` made exec the leader of a session of its own.
    let members = session_members(exec.child.id());
    assert!(members.len() >= 2, "exec and its helper: {members:?}");
    kill_all(&members);
    let _ = exec.child.wait();
    place.all_planted_after_a_while();
    let next = place
        .cordon(&["run", "--", "true"])
        .output()
        .expect("cordon run");
    assert!(next.status.success(), "{}", stderr(&next));
    assert!(
        stderr(&next).contains("ended before its clean-up"),
        "the next run did not say what it undid: {}",
        stderr(&next)
    );
    assert!(place.planted().is_empty(), "left: {:?}", place.planted());
    assert!(
        place.ws.join("sub/.git/HEAD").exists(),
        "more than the hook was removed"
    );
}

/// A cold run (`CORDON_NO_WARM=1`) plants and sleeps; its whole process tree is killed at
/// once, the watcher that would undo it included. `cordon doctor` undoes it and says so.
fn a_killed_tree_leaves_nothing_once_doctor_runs() {
    let place = Place::new();
    let mut exec = Exec::start(&place, &[("CORDON_NO_WARM", "1")], false);
    exec.run("plant", &format!("{PLANT}; exec sleep 876543"));
    exec.wait_output("plant", "planted");
    let pids = tree(exec.child.id());
    assert!(pids.len() >= 3, "exec, cordon run, its watcher: {pids:?}");
    kill_all(&pids);
    let _ = exec.child.wait();
    place.all_planted_after_a_while();
    let doctor = place.cordon(&["doctor"]).output().expect("cordon doctor");
    let said = String::from_utf8_lossy(&doctor.stdout).to_string() + &stderr(&doctor);
    assert!(said.contains("ended before its clean-up"), "{said}");
    assert!(
        said.contains("undid what 1 killed run(s) had left"),
        "{said}"
    );
    assert!(place.planted().is_empty(), "left: {:?}", place.planted());
}

/// `n` cold runs side by side in one directory: the first plants, each waits for its own
/// go-ahead, and then tries to plant again; they end in `order` (indexes). Whatever the
/// order, nothing planted is left once the last has ended.
fn side_by_side_cold(n: usize, order: &[usize]) {
    let place = Place::new();
    let mut runs = Vec::new();
    for i in 0..n {
        let first = if i == 0 { PLANT } else { "true" };
        let script = format!(
            "{first}; touch started-{i}; while [ ! -e go-{i} ]; do sleep 0.02; done; \
             {PLANT} 2>/dev/null; true"
        );
        let child = place
            .cordon(&["run", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cordon run");
        place.wait_for(&format!("started-{i}"));
        runs.push(Some(child));
    }
    for &i in order {
        std::fs::write(place.ws.join(format!("go-{i}")), "").expect("go");
        let out = runs[i]
            .take()
            .expect("once")
            .wait_with_output()
            .expect("wait");
        assert!(
            out.status.success() || out.status.code() == Some(1),
            "run {i}: {}",
            stderr(&out)
        );
    }
    assert!(
        place.planted().is_empty(),
        "{n} runs ending in the order {order:?} left {:?}",
        place.planted()
    );
}

fn two_runs_side_by_side_the_planter_ending_first() {
    side_by_side_cold(2, &[0, 1]);
}

fn two_runs_side_by_side_the_planter_ending_last() {
    side_by_side_cold(2, &[1, 0]);
}

fn three_runs_side_by_side() {
    side_by_side_cold(3, &[1, 0, 2]);
}

/// The same with warm commands of one `cordon exec` (the second gets a sandbox of its own,
/// built over the planted files, which are then read-only in its view).
fn two_warm_commands_side_by_side() {
    for planter_ends_first in [true, false] {
        let place = Place::new();
        let mut exec = Exec::start(&place, &[], false);
        let script = |i: usize, first: &str| {
            format!(
                "{first}; touch started-{i}; while [ ! -e go-{i} ]; do sleep 0.02; done; \
                 {PLANT} 2>/dev/null; true"
            )
        };
        exec.run("0", &script(0, PLANT));
        place.wait_for("started-0");
        exec.run("1", &script(1, "true"));
        place.wait_for("started-1");
        let order = if planter_ends_first { [0, 1] } else { [1, 0] };
        for i in order {
            std::fs::write(place.ws.join(format!("go-{i}")), "").expect("go");
            let exited = exec.wait("exited", &i.to_string());
            assert_eq!(exited["warm"], true, "{exited}");
        }
        assert!(
            place.planted().is_empty(),
            "warm, the planter ending {}: left {:?}",
            if planter_ends_first { "first" } else { "last" },
            place.planted()
        );
    }
}

/// A command that leaves a process behind, planting over and over and deaf to the polite
/// signals: once cordon has said how the command ended, the planter is gone, so the undo that
/// follows is the last word. Cold (cordon waits for the sandbox's first process, whose exit
/// takes its PID namespace with it) and warm (the keeper kills and reaps everything in its
/// namespace before it says `exit`).
fn a_process_left_behind_plants_nothing_after_the_run() {
    let planter = format!(
        "(trap '' HUP INT TERM; while :; do {PLANT} >/dev/null 2>&1; done) </dev/null >/dev/null 2>&1 & \
         while [ ! -e .bashrc ]; do sleep 0.01; done; echo running"
    );
    let place = Place::new();
    let out = place
        .cordon(&["run", "-c", &planter])
        .env("CORDON_NO_WARM", "1")
        .output()
        .expect("cordon run");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("running"),
        "the planter never planted: {}",
        stderr(&out)
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        place.planted().is_empty(),
        "cold: left {:?}",
        place.planted()
    );

    let place = Place::new();
    let mut exec = Exec::start(&place, &[], false);
    exec.run("0", &planter);
    exec.wait_output("0", "running");
    let exited = exec.wait("exited", "0");
    assert_eq!(exited["warm"], true, "{exited}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        place.planted().is_empty(),
        "warm: left {:?}",
        place.planted()
    );
}

/// What `cordon run --agent claude` keeps: the agent's user settings, in a home of the test's.
struct AgentHome {
    home: PathBuf,
    settings: PathBuf,
}

const SETTINGS_BEFORE: &str = "{\"model\": \"opus\"}";

impl AgentHome {
    fn new(place: &Place) -> AgentHome {
        let home = place.ws.parent().expect("parent").join("home");
        let settings = home.join(".claude/settings.json");
        std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
        std::fs::write(&settings, SETTINGS_BEFORE).expect("write");
        AgentHome { home, settings }
    }

    /// A `run --agent claude` that plants a hook of its own (`n`) in the agent's settings,
    /// says `started-N` in the workspace, and waits for `go-N`.
    fn plant_and_wait(&self, place: &Place, n: usize) -> Child {
        let script = format!(
            "printf '{{\"model\": \"opus\", \"hooks\": {{\"SessionStart\": \"run-{n}\"}}}}' > ~/.claude/settings.json; \
             touch started-{n}; while [ ! -e go-{n} ]; do sleep 0.02; done"
        );
        let child = place
            .cordon(&["run", "--agent", "claude", "-c", &script])
            .env("HOME", &self.home)
            .env("CORDON_NO_WARM", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cordon run --agent");
        place.wait_for(&format!("started-{n}"));
        child
    }

    fn settings(&self) -> String {
        std::fs::read_to_string(&self.settings).expect("settings")
    }
}

/// Two `run --agent` of one agent side by side: the first plants a hook in the agent's user
/// settings; the second starts after that, so it finds the hook already there, and plants
/// another. Whichever ends last, the settings end as the first run found them: the second's
/// view of "before" holds the first's hook and must not be what is put back.
fn two_agent_runs_side_by_side_leave_the_settings_as_the_first_found_them() {
    for first_ends_first in [true, false] {
        let place = Place::new();
        let agent = AgentHome::new(&place);
        let mut runs = [
            Some(agent.plant_and_wait(&place, 0)),
            Some(agent.plant_and_wait(&place, 1)),
        ];
        let order = if first_ends_first { [0, 1] } else { [1, 0] };
        let mut said = String::new();
        for i in order {
            std::fs::write(place.ws.join(format!("go-{i}")), "").expect("go");
            let out = runs[i]
                .take()
                .expect("once")
                .wait_with_output()
                .expect("wait");
            said += &stderr(&out);
        }
        assert_eq!(
            agent.settings(),
            SETTINGS_BEFORE,
            "the first ending {}: {said}",
            if first_ends_first { "first" } else { "last" }
        );
        assert!(
            said.contains("settings.json") && said.contains("changed: hooks"),
            "the report names the file and the key: {said}"
        );
    }
}

/// A `run --agent` plants a hook in the agent's settings; its whole process tree (cordon,
/// its watcher, the command) is killed at once. The settings stay planted until a cordon
/// runs again: then `cordon doctor` puts them back and says so.
fn a_killed_agent_run_has_its_settings_put_back_by_the_next_cordon() {
    let place = Place::new();
    let agent = AgentHome::new(&place);
    let run = agent.plant_and_wait(&place, 0);
    let pids = tree(run.id());
    assert!(
        pids.len() >= 3,
        "cordon run, its watcher, the command: {pids:?}"
    );
    kill_all(&pids);
    let _ = run.wait_with_output();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        agent.settings().contains("run-0"),
        "something undid the plant with every cordon process killed"
    );
    let doctor = place
        .cordon(&["doctor"])
        .env("HOME", &agent.home)
        .output()
        .expect("cordon doctor");
    let said = String::from_utf8_lossy(&doctor.stdout).to_string() + &stderr(&doctor);
    assert!(said.contains("ended before its clean-up"), "{said}");
    assert!(said.contains("changed: hooks"), "{said}");
    assert_eq!(agent.settings(), SETTINGS_BEFORE, "{said}");
}

common::tests!(
    "guards.rs":
    a_killed_session_leaves_nothing_once_cordon_runs_there_again,
    a_killed_tree_leaves_nothing_once_doctor_runs,
    two_runs_side_by_side_the_planter_ending_first,
    two_runs_side_by_side_the_planter_ending_last,
    three_runs_side_by_side,
    two_warm_commands_side_by_side,
    a_process_left_behind_plants_nothing_after_the_run,
    two_agent_runs_side_by_side_leave_the_settings_as_the_first_found_them,
    a_killed_agent_run_has_its_settings_put_back_by_the_next_cordon,
);
