//! cordon's network egress: domain rules and the HTTP/SOCKS5 proxy that is a sandbox's only
//! way out.
//!
//! This crate is laid out for the network issue. Nothing is enforced yet.
