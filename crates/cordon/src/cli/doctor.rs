//! `cordon doctor`: what this machine supports, what cordon will enforce here, and how to fix
//! what is missing.

use std::path::PathBuf;

use cordon_app::settings::{self, LayerValues, Places};

/// What the settings ask of this machine, as doctor findings: settings that do not load stop
/// every run, and settings that require namespaces stop runs where there are none.
fn configured(found: &[cordon_sandbox::linux::doctor::Mechanism]) -> Vec<Mechanism> {
    let userns = found.first().is_some_and(|m| m.available);
    let userns_fix = found.first().and_then(|m| m.fix.clone());
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut out = Vec::new();
    let merged = settings::load(&Places::from(&cwd), LayerValues::default(), false);
    let required = match &merged {
        Ok(s) => {
            let files: Vec<String> = s.files.iter().map(ToString::to_string).collect();
            out.push(Mechanism {
                name: "settings",
                available: true,
                detail: if files.is_empty() {
                    "no cordon.toml; built-in defaults (cordon config show)".into()
                } else {
                    format!("{} (cordon config show)", files.join(", "))
                },
                fix: None,
                required: true,
            });
            s.fail_if_unavailable.clone().filter(|f| f.value)
        }
        Err(e) => {
            out.push(Mechanism {
                name: "settings",
                available: false,
                detail: format!("{e:#}"),
                fix: Some("fix the file named above; every run refuses until then".into()),
                required: true,
            });
            None
        }
    };
    let (available, detail, fix) = match (&required, userns) {
        (_, true) => (
            true,
            "cordon run: namespaces, a read-only view of the host, Landlock and seccomp".into(),
            None,
        ),
        (Some(f), false) => (
            false,
            format!(
                "sandbox.fail_if_unavailable ({}) requires user namespaces, which are unavailable: every run refuses",
                f.from
            ),
            userns_fix,
        ),
        (None, false) => (
            true,
            "cordon run: Landlock and seccomp alone, weaker (no private /tmp or loopback, protected files put back after the run); it says so on every run".into(),
            userns_fix,
        ),
    };
    out.push(Mechanism {
        name: "configured",
        available,
        detail,
        fix,
        required: true,
    });
    // Command lines (exec, mcp, shell, `run -c`) are decided with bash's grammar and run by
    // bash alone; a program given directly runs without it.
    let backend = cordon_app::run::backend::BackendChoice::default();
    let host_bash = cordon_sandbox::shell::host_bash().is_some();
    out.push(Mechanism {
        name: "shell",
        available: host_bash || backend.in_image(),
        detail: cordon_app::run::shell_said(&backend),
        fix: (!host_bash && !backend.in_image()).then(|| {
            "install bash (Debian and Ubuntu: apt-get install bash); until then every command line is refused, and `cordon run -- PROGRAM ARGS` still runs".into()
        }),
        required: false,
    });
    // What runs killed with every cordon process of theirs left, undone now (said above).
    let journal = cordon_app::run::journal::journal();
    let undone = cordon_app::run::journal::sweep();
    out.push(Mechanism {
        name: "guards",
        available: journal.is_some(),
        detail: match &journal {
            Some(j) if undone > 0 => format!(
                "{}: undid what {undone} killed run(s) had left (listed above)",
                j.dir().display()
            ),
            Some(j) => format!("{}: nothing left by killed runs", j.dir().display()),
            None => "no guard journal (HOME is not set): what a run plants is undone only while a process of it lives".into(),
        },
        fix: journal.is_none().then(|| "set HOME".into()),
        required: false,
    });
    // Codex runs cordon's hook only once the person trusts it; where Codex is installed and
    // its settings here hold the hook, Codex says whether it does.
    if let Some(codex) = cordon_app::agents::codex_trust::find_codex() {
        use cordon_app::agents::codex_trust::HookTrust;
        let trust = cordon_app::agents::codex_trust::cordons_hook(&codex, &cwd);
        if trust != HookTrust::Absent {
            out.push(Mechanism {
                name: "codex hook",
                available: trust == HookTrust::Trusted,
                detail: trust.said(),
                fix: (trust != HookTrust::Trusted).then(|| HookTrust::FIX.into()),
                required: false,
            });
        }
    }
    out
}

type Mechanism = cordon_sandbox::linux::doctor::Mechanism;

pub fn doctor(json: bool) -> anyhow::Result<u8> {
    let mut found = cordon_sandbox::linux::doctor::probe();
    let extra = configured(&found);
    found.extend(extra);
    let missing_required = found.iter().any(|m| m.required && !m.available);
    if json {
        println!("{}", serde_json::to_string_pretty(&found)?);
    } else {
        let paint = super::colour(&std::io::stdout());
        for m in &found {
            let (mark, colour) = if m.available {
                ("ok  ", "32")
            } else if m.required {
                ("FAIL", "31")
            } else {
                ("weak", "33")
            };
            let mark = if paint {
                format!("\x1b[{colour}m{mark}\x1b[0m")
            } else {
                mark.to_string()
            };
            println!("{mark} {:<16} {}", m.name, m.detail);
            if let Some(fix) = &m.fix {
                println!("     {:<16} fix: {fix}", "");
            }
        }
        let failing: Vec<&cordon_sandbox::linux::doctor::Mechanism> = found
            .iter()
            .filter(|m| m.required && !m.available)
            .collect();
        // Settings that do not load stop every run, but say nothing of the machine.
        if failing.iter().all(|m| m.name == "settings") && !failing.is_empty() {
            println!(
                "\nThis machine can sandbox commands, but every cordon run refuses until the settings named above load."
            );
        } else if missing_required {
            println!(
                "\ncordon run cannot sandbox commands on this machine until the FAIL lines are fixed."
            );
        }
    }
    Ok(if missing_required { 1 } else { 0 })
}
