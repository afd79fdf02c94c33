//! Which hosts a sandboxed command may reach.
//!
//! `example.com` is that host; `*.example.com` its subdomains only; `host:port` narrows a rule
//! to one port; an IP address or CIDR block allows raw addresses. Names compare
//! case-insensitively, without a trailing dot, and in punycode. Deny wins over allow. A name
//! that resolves to a loopback, private, link-local or metadata address is refused unless the
//! user allowed private addresses, so an allowed name cannot be pointed at the host's own
//! services.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::IpNet;

/// Why a rule could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("`{0}`: empty rule")]
    Empty(String),
    #[error(
        "`{0}`: a wildcard may only stand for subdomains, as the first label (`*.example.com`)"
    )]
    Wildcard(String),
    #[error("`{0}`: `{1}` is not a port number (1-65535)")]
    Port(String, String),
    #[error("`{0}`: not a valid host name ({1})")]
    Name(String, String),
    #[error("`{0}`: not a valid CIDR block")]
    Cidr(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// One host name, normalised.
    Exact(String),
    /// Strict subdomains of this name, normalised.
    Subdomains(String),
    Ip(IpAddr),
    Net(IpNet),
}

/// One `allow-domain` or `deny-domain` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainRule {
    host: HostPattern,
    port: Option<u16>,
    /// As the user wrote it, to name it in answers.
    text: String,
}

impl fmt::Display for DomainRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A host name in the form rules compare: ASCII (punycode), lower case, no trailing dot.
pub fn normalise_name(name: &str) -> Result<String, String> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    if trimmed.is_empty() {
        return Err("empty name".into());
    }
    let ascii = idna::domain_to_ascii(trimmed).map_err(|e| e.to_string())?;
    if ascii.is_empty() || ascii.len() > 253 {
        return Err("a name is 1 to 253 characters".into());
    }
    if ascii
        .split('.')
        .any(|l| l.is_empty() || l.len() > 63 || l.starts_with('-') || l.ends_with('-'))
    {
        return Err("each label is 1 to 63 characters and cannot start or end with `-`".into());
    }
    if !ascii
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
    {
        return Err("only letters, digits, `-`, `_` and `.`".into());
    }
    Ok(ascii)
}

/// Splits `host:port`, `[v6]:port`, a bare IPv6 address or a bare host.
fn split_port(text: &str) -> Result<(&str, Option<u16>), RuleError> {
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| RuleError::Port(text.to_string(), p.to_string()))
    };
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| RuleError::Name(text.to_string(), "unclosed `[`".into()))?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, Some(port(p)?))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(RuleError::Name(text.to_string(), "text after `]`".into())),
        };
    }
    // More than one colon: an IPv6 address (or CIDR) without brackets, no port.
    if text.matches(':').count() > 1 {
        return Ok((text, None));
    }
    match text.rsplit_once(':') {
        Some((host, p)) => Ok((host, Some(port(p)?))),
        None => Ok((text, None)),
    }
}

impl FromStr for DomainRule {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<Self, RuleError> {
        let given = text.trim();
        if given.is_empty() {
            return Err(RuleError::Empty(text.to_string()));
        }
        let (host, port) = split_port(given)?;
        let pattern = if host.contains('/') {
            HostPattern::Net(
                host.parse::<IpNet>()
                    .map_err(|_| RuleError::Cidr(given.to_string()))?
                    .trunc(),
            )
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            HostPattern::Ip(ip)
        } else if let Some(base) = host.strip_prefix("*.") {
            if base.contains('*') {
                return Err(RuleError::Wildcard(given.to_string()));
            }
            HostPattern::Subdomains(
                normalise_name(base).map_err(|e| RuleError::Name(given.to_string(), e))?,
            )
        } else if host.contains('*') {
            return Err(RuleError::Wildcard(given.to_string()));
        } else {
            HostPattern::Exact(
                normalise_name(host).map_err(|e| RuleError::Name(given.to_string(), e))?,
            )
        };
        Ok(DomainRule {
            host: pattern,
            port,
            text: given.to_string(),
        })
    }
}

/// A destination as a client named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A normalised name.
    Name(String),
    Ip(IpAddr),
}

impl Host {
    /// Reads a host as given in a request (`example.com`, `[::1]`, `10.0.0.1`).
    pub fn parse(text: &str) -> Result<Host, String> {
        let bare = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Host::Ip(ip));
        }
        normalise_name(text).map(Host::Name)
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

impl DomainRule {
    fn matches(&self, host: &Host, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.host, host) {
            (HostPattern::Exact(n), Host::Name(h)) => n == h,
            (HostPattern::Subdomains(base), Host::Name(h)) => {
                h.len() > base.len() + 1
                    && h.ends_with(base.as_str())
                    && h.as_bytes()[h.len() - base.len() - 1] == b'.'
            }
            (HostPattern::Ip(ip), Host::Ip(h)) => canonical(*ip) == canonical(*h),
            (HostPattern::Net(net), Host::Ip(h)) => net.contains(&canonical(*h)),
            _ => false,
        }
    }

    /// Whether this rule names addresses (an IP or a block) rather than host names.
    fn is_address(&self) -> bool {
        matches!(self.host, HostPattern::Ip(_) | HostPattern::Net(_))
    }
}

/// An IPv4 address carried in IPv6 (`::ffff:a.b.c.d`) is compared as the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// What the rules say about a destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused; the text names the rule or the reason.
    Deny(String),
    /// No rule speaks of it: deny when nobody can be asked.
    Unknown,
}

/// The allow and deny lists, and whether private addresses may be reached.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub allow: Vec<DomainRule>,
    pub deny: Vec<DomainRule>,
    pub allow_private_ips: bool,
}

impl Rules {
    /// Whether anything at all may be reached; without that there is no proxy and no network.
    pub fn allows_anything(&self) -> bool {
        !self.allow.is_empty()
    }

    /// The rules' answer for `host:port` as the client named it.
    pub fn check(&self, host: &Host, port: u16) -> Verdict {
        if let Some(rule) = self.deny.iter().find(|r| r.matches(host, port)) {
            return Verdict::Deny(format!("denied by `{rule}`"));
        }
        if self.allow.iter().any(|r| r.matches(host, port)) {
            return Verdict::Allow;
        }
        match host {
            // A raw address is only ever reached by an address rule.
            Host::Ip(_) => Verdict::Deny("a raw IP address needs an IP or CIDR rule".into()),
            Host::Name(_) => Verdict::Unknown,
        }
    }

    /// Whether an allowed name may be reached at `ip`, one of the addresses it resolved to:
    /// not at a private, loopback, link-local or metadata address unless the user allowed
    /// those or named the address itself, and never at one a deny rule covers.
    pub fn check_address(&self, ip: IpAddr, port: u16) -> Result<(), String> {
        let host = Host::Ip(ip);
        if let Some(rule) = self.deny.iter().find(|r| r.matches(&host, port)) {
            return Err(format!("resolves to {ip}, denied by `{rule}`"));
        }
        let named = self
            .allow
            .iter()
            .any(|r| r.is_address() && r.matches(&host, port));
        if is_private(ip) && !self.allow_private_ips && !named {
            return Err(format!(
                "resolves to {ip}, a private or local address (allow those with --allow-private-ips)"
            ));
        }
        Ok(())
    }
}

/// Loopback, private, link-local (cloud metadata lives at 169.254.169.254), shared, multicast,
/// unspecified or reserved: addresses a name found on the internet has no business pointing at.
pub fn is_private(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => private_v6(v6),
    }
}

fn private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        // Shared address space (carrier-grade NAT), benchmarking, reserved.
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240
}

fn private_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    // IPv4 embedded by NAT64 (64:ff9b::/96) or 6to4 (2002::/16) reaches that IPv4 address.
    let embedded = if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        Some(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ))
    } else if s[0] == 0x2002 {
        Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ))
    } else {
        None
    };
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xffc0) == 0xfe80 // link-local
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated, still routed somewhere)
        || (s[0..6] == [0, 0, 0, 0, 0, 0]) // IPv4-compatible
        || embedded.is_some_and(private_v4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        Rules {
            allow: allow.iter().map(|r| r.parse().expect("rule")).collect(),
            deny: deny.iter().map(|r| r.parse().expect("rule")).collect(),
            allow_private_ips: false,
        }
    }

    fn name(n: &str) -> Host {
        Host::parse(n).expect("host")
    }

    #[test]
    fn exact_and_subdomain_rules() {
        let r = rules(&["example.com", "*.pkg.dev"], &[]);
        assert_eq!(r.check(&name("example.com"), 443), Verdict::Allow);
        assert_eq!(r.check(&name("EXAMPLE.com."), 80), Verdict::Allow);
        assert_eq!(r.check(&name("www.example.com"), 443), Verdict::Unknown);
        assert_eq!(r.check(&name("a.pkg.dev"), 443), Verdict::Allow);
        assert_eq!(r.check(&name("a.b.pkg.dev"), 443), Verdict::Allow);
        assert_eq!(r.check(&name("pkg.dev"), 443), Verdict::Unknown);
        assert_eq!(r.check(&name("evilpkg.dev"), 443), Verdict::Unknown);
        assert_eq!(r.check(&name("pkg.dev.evil.com"), 443), Verdict::Unknown);
    }

    #[test]
    fn ports_deny_and_punycode() {
        let r = rules(
            &["example.com:443", "*.example.org", "bücher.de"],
            &["secret.example.org"],
        );
        assert_eq!(r.check(&name("example.com"), 443), Verdict::Allow);
        assert_eq!(r.check(&name("example.com"), 80), Verdict::Unknown);
        assert!(matches!(
            r.check(&name("secret.example.org"), 443),
            Verdict::Deny(why) if why.contains("secret.example.org")
        ));
        assert_eq!(r.check(&name("www.example.org"), 443), Verdict::Allow);
        assert_eq!(r.check(&name("xn--bcher-kva.de"), 443), Verdict::Allow);
        assert_eq!(r.check(&name("BÜCHER.de"), 443), Verdict::Allow);
    }

    #[test]
    fn raw_addresses_need_address_rules() {
        let r = rules(&["example.com", "10.1.0.0/16", "::1"], &[]);
        assert!(matches!(
            r.check(&name("93.184.216.34"), 443),
            Verdict::Deny(_)
        ));
        assert_eq!(r.check(&name("10.1.2.3"), 22), Verdict::Allow);
        assert_eq!(r.check(&name("[::1]"), 22), Verdict::Allow);
        assert_eq!(r.check(&name("::ffff:10.1.2.3"), 22), Verdict::Allow);
    }

    #[test]
    fn names_pointing_at_private_addresses_are_refused() {
        let mut r = rules(&["example.com", "192.168.1.5"], &[]);
        for ip in [
            "127.0.0.1",
            "10.0.0.8",
            "169.254.169.254",
            "::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "0.0.0.0",
            "100.64.0.1",
        ] {
            let ip: IpAddr = ip.parse().expect("ip");
            assert!(r.check_address(ip, 443).is_err(), "{ip} was allowed");
        }
        assert!(
            r.check_address("93.184.216.34".parse().expect("ip"), 443)
                .is_ok()
        );
        assert!(
            r.check_address("192.168.1.5".parse().expect("ip"), 443)
                .is_ok(),
            "an address the user named is allowed"
        );
        r.allow_private_ips = true;
        assert!(
            r.check_address("10.0.0.8".parse().expect("ip"), 443)
                .is_ok()
        );
    }

    #[test]
    fn bad_rules_say_why() {
        for (bad, want) in [
            ("", "empty"),
            ("*", "wildcard"),
            ("*example.com", "wildcard"),
            ("a.*.com", "wildcard"),
            ("example.com:0", "port"),
            ("example.com:http", "port"),
            ("10.0.0.0/33", "CIDR"),
            ("exa mple.com", "valid host"),
            ("-bad.com", "valid host"),
        ] {
            let err = bad.parse::<DomainRule>().expect_err(bad).to_string();
            assert!(err.contains(want), "{bad}: {err}");
        }
    }

    /// A host name of 1 to 4 labels, each starting with a letter (all-digit names are IPv4
    /// addresses, which other tests cover) and without two hyphens in a row (`xn--` and other
    /// `??--` labels are reserved by IDNA and refused as names).
    fn name_strategy() -> impl Strategy<Value = String> {
        proptest::collection::vec("[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,4})?", 1..4)
            .prop_map(|labels| labels.join("."))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn no_text_makes_rule_or_host_parsing_panic(text in "\\PC{0,80}") {
            let _ = text.parse::<DomainRule>();
            let _ = Host::parse(&text);
            let _ = normalise_name(&text);
        }

        #[test]
        fn normalising_is_idempotent_and_ignores_case_and_a_trailing_dot(name in name_strategy()) {
            let once = normalise_name(&name).expect("valid");
            prop_assert_eq!(normalise_name(&once).expect("valid"), once.clone());
            prop_assert_eq!(normalise_name(&format!("{}.", name.to_uppercase())).expect("valid"), once);
        }

        #[test]
        fn a_subdomain_rule_matches_exactly_the_strict_subdomains(
            base in name_strategy(),
            sub in name_strategy(),
            other in name_strategy(),
            port in 1u16..,
        ) {
            let r = rules(&[&format!("*.{base}")], &[]);
            let inside = format!("{sub}.{base}");
            if inside.len() <= 253 {
                prop_assert_eq!(r.check(&name(&inside), port), Verdict::Allow);
            }
            prop_assert_eq!(r.check(&name(&base), port), Verdict::Unknown);
            let ends_with_base = other == base || other.ends_with(&format!(".{base}"));
            if !ends_with_base {
                prop_assert_eq!(r.check(&name(&other), port), Verdict::Unknown);
                // A name that merely ends with the same letters is not a subdomain.
                let glued = format!("{other}{base}");
                if glued.len() <= 253 && !glued.ends_with(&format!(".{base}")) {
                    prop_assert_eq!(r.check(&name(&glued), port), Verdict::Unknown);
                }
            }
        }

        #[test]
        fn deny_always_wins(host in name_strategy(), port in 1u16..) {
            let r = rules(&[&host, &format!("*.{host}")], &[&host]);
            let denied = matches!(r.check(&name(&host), port), Verdict::Deny(_));
            prop_assert!(denied);
        }
    }
}
