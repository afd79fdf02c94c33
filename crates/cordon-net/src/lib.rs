//! cordon's network egress: domain rules and the HTTP/SOCKS5 proxy that is a sandbox's only
//! way out.

pub mod rules;
pub mod wire;

pub use rules::{DomainRule, Host, RuleError, Rules, Verdict};
