//! cordon's sandbox: what a command may touch, and how each OS enforces it.
//!
//! This crate is laid out for the Linux sandbox issue (`cordon run`): a backend-neutral
//! `SandboxSpec` and backends under `linux/`, `seatbelt/` and `container/`. Nothing is
//! enforced yet; the policy engine (`cordon-policy`) is the only part of cordon that decides
//! today.
