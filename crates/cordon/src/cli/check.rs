//! `cordon check`: one decision, or a stream of them.

use std::io::Write;

use clap::Args;
use serde_json::json;

use super::wire::{MAX_LINE, parse_request, read_line};
use super::{CallFlags, PolicyFlags};
use crate::exit;
use cordon_app::decide::{Decider, LiveDecider};

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    call: CallFlags,
    #[command(flatten)]
    policy: PolicyFlags,
    /// Read one call per line from stdin ({"tool","args","mode"?}) and write one decision per
    /// line, in order.
    #[arg(long, conflicts_with_all = ["tool", "args", "server", "annotations", "command"])]
    jsonl: bool,
}

pub fn run(args: CheckArgs) -> anyhow::Result<u8> {
    let policy = args.policy.config();
    let defaults = policy.options();
    if !args.jsonl {
        let call = args.call.call()?;
        let outcome = Decider::new(&policy)?.check(&call, defaults);
        println!("{}", serde_json::to_string(&outcome)?);
        return Ok(exit::OK);
    }
    let mut live = LiveDecider::new(policy, None)?;
    let mut input = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        n += 1;
        let Some(complete) = read_line(&mut input, &mut line)? else {
            break;
        };
        let reply = if !complete {
            json!({ "error": format!("line {n}: longer than {MAX_LINE} bytes; not read") })
        } else {
            let text = match std::str::from_utf8(&line) {
                Ok(t) => t.trim(),
                Err(e) => {
                    writeln!(
                        out,
                        "{}",
                        json!({ "error": format!("line {n}: not UTF-8: {e}") })
                    )?;
                    out.flush()?;
                    continue;
                }
            };
            if text.is_empty() {
                continue;
            }
            match (parse_request(text, defaults.mode), live.current()) {
                (Ok(_), Err(e)) => json!({ "error": format!("line {n}: {e}") }),
                (Ok((call, mode)), Ok(decider)) => {
                    let mut opts = defaults;
                    opts.mode = mode;
                    serde_json::to_value(decider.check(&call, opts))?
                }
                // A bad line gets an error in its place, so answers stay in step with requests.
                (Err(e), _) => json!({ "error": format!("line {n}: {e}") }),
            }
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(exit::OK)
}
