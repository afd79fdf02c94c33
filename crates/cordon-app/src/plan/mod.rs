//! Planning a run: from what the user asked (flags and settings) to what the sandbox is given.
//! So far the paths: `cordon run`'s path flags and settings, expanded or kept live.

pub mod paths;
