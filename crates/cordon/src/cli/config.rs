//! `cordon config`: the settings as cordon sees them, merged from every layer.

use anyhow::Context;
use clap::Subcommand;
use serde_json::Value;

use cordon_app::settings::{self, LayerValues, Places, Settings, Source};

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the merged settings, each value with the layer and file it came from, what was
    /// left out and why, and what managed settings lock.
    Show {
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
        /// Let this project's `.cordon/cordon.toml` widen what is allowed, as `cordon run
        /// --trust-project` would.
        #[arg(long)]
        trust_project: bool,
        /// Also apply this file, as `cordon run --settings` would.
        #[arg(long, value_name = "FILE")]
        settings: Option<std::path::PathBuf>,
        /// Also apply this profile, as `cordon run --profile` would.
        #[arg(long, value_name = "NAME", value_parser = settings::parse_profile)]
        profile: Option<String>,
    },
    /// Print the JSON Schema of cordon.toml, for editors.
    Schema,
}

/// Each merged field under the name it has in `cordon.toml`.
const KEYS: &[(&str, &str)] = &[
    ("enabled", "sandbox.enabled"),
    ("fail_if_unavailable", "sandbox.fail_if_unavailable"),
    ("enabled_platforms", "sandbox.enabled_platforms"),
    ("excluded_commands", "sandbox.excluded_commands"),
    ("auto_allow_if_sandboxed", "sandbox.auto_allow_if_sandboxed"),
    (
        "allow_unsandboxed_commands",
        "sandbox.allow_unsandboxed_commands",
    ),
    ("backend", "sandbox.backend"),
    ("container_image", "container.image"),
    ("container_profile", "container.profile"),
    ("allow_write", "filesystem.allow_write"),
    ("deny_write", "filesystem.deny_write"),
    ("deny_read", "filesystem.deny_read"),
    ("allow_read", "filesystem.allow_read"),
    ("private_caches", "filesystem.private_caches"),
    ("allow_domains", "network.allow_domains"),
    ("deny_domains", "network.deny_domains"),
    ("allow_private_ips", "network.allow_private_ips"),
    ("allow_local_binding", "network.allow_local_binding"),
    ("allow_unix_sockets", "network.allow_unix_sockets"),
    ("upstream_proxy", "network.upstream_proxy"),
    ("keep_env", "env.keep"),
    ("deny_env", "env.deny"),
    ("max_processes", "limits.max_processes"),
    ("memory", "limits.memory"),
    ("cpu_time", "limits.cpu_time"),
    ("cpus", "limits.cpus"),
    ("timeout", "limits.timeout"),
    ("max_commands", "limits.max_commands"),
    ("max_session_processes", "limits.max_session_processes"),
    ("ignore_violations", "ignore_violations"),
    ("allowed_tools", "policy.allowed_tools"),
    ("excluded_tools", "policy.excluded_tools"),
];

pub fn run(cmd: ConfigCommand) -> anyhow::Result<u8> {
    match cmd {
        ConfigCommand::Show {
            json,
            trust_project,
            settings,
            profile,
        } => {
            let cwd = std::env::current_dir().context("cannot read the current directory")?;
            let places = Places {
                profile,
                given: settings,
                ..Places::from(&cwd)
            };
            let s = settings::load(&places, LayerValues::default(), trust_project)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                print!("{}", show(&s, &places, trust_project)?);
            }
            Ok(0)
        }
        ConfigCommand::Schema => {
            println!(
                "{}",
                serde_json::to_string_pretty(&settings::file::schema())?
            );
            Ok(0)
        }
    }
}

/// The merged settings as `key = value  # from` lines; deny lists one entry per line (`+=`),
/// since each entry has its own source.
fn show(s: &Settings, places: &Places, trusted: bool) -> anyhow::Result<String> {
    let mut out = String::from(
        "# cordon settings: managed < user < project < --profile < --settings < command line\n",
    );
    let mut layer = |name: &str, path: Option<&std::path::Path>, note: &str| {
        let state = match path {
            Some(p) if s.files.iter().any(|f| f.file.as_deref() == Some(p)) => {
                format!("{}{note}", p.display())
            }
            Some(p) => format!("{} (none)", p.display()),
            None => "(none)".to_string(),
        };
        out.push_str(&format!("# {name}: {state}\n"));
    };
    layer("managed", Some(&places.managed), "");
    layer("user", places.user.as_deref(), "");
    let note = if trusted {
        " (trusted)"
    } else {
        " (untrusted: it may only tighten; --trust-project)"
    };
    layer("project", places.project.as_deref(), note);
    if let Some(given) = &places.given {
        layer("--settings", Some(given), "");
    }
    if let Some(profile) = &places.profile {
        out.push_str(&format!("# profile: {profile}\n"));
    }
    let all = serde_json::to_value(s)?;
    for (field, key) in KEYS {
        match &all[*field] {
            Value::Null => {}
            Value::Array(entries) => {
                for e in entries {
                    out.push_str(&format!(
                        "{key} += {}  # {}\n",
                        e["value"],
                        from(&e["from"])
                    ));
                }
            }
            v => out.push_str(&format!("{key} = {}  # {}\n", v["value"], from(&v["from"]))),
        }
    }
    let locks: Vec<&String> = all["locks"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, on)| on.as_bool() == Some(true))
        .map(|(name, _)| name)
        .collect();
    if !locks.is_empty() {
        let names: Vec<&str> = locks.iter().map(|s| s.as_str()).collect();
        out.push_str(&format!(
            "# locked by managed settings: {}\n",
            names.join(", ")
        ));
    }
    for why in &s.left_out {
        out.push_str(&format!("# left out: {why}\n"));
    }
    Ok(out)
}

fn from(source: &Value) -> String {
    serde_json::from_value::<Source>(source.clone()).map_or_else(|_| "?".into(), |s| s.to_string())
}

/// `cordon import FILE`: another tool's settings as a cordon.toml, on standard output.
pub fn import(path: &std::path::Path) -> anyhow::Result<u8> {
    let imported = settings::import::import(path)?;
    print!("{}", settings::import::to_toml(&imported, path)?);
    Ok(0)
}
