//! `cordon run`: a command in the sandbox.

use super::flags::RunArgs;

pub fn run(args: RunArgs) -> anyhow::Result<u8> {
    cordon_app::run::run(&args.sources()?, args.launch())
}
