//! cordon's network egress: domain rules and the HTTP/SOCKS5 proxy that is a sandbox's only
//! way out.

pub mod proxy;
pub mod rules;
#[cfg(unix)]
pub mod serve;
#[cfg(target_os = "linux")]
mod splice;
pub mod wire;

pub use proxy::{Answer, Asker, Blocked, Pending, Proxy, ProxyConfig, Upstream};
pub use rules::{DomainRule, Host, RuleError, Rules, Verdict};
