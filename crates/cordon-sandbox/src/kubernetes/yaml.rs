//! Manifests as YAML that every reader takes for what was meant.
//!
//! Kubernetes reads YAML with go-yaml's YAML 1.1 rules, where a plain `yes`, `off`, `0123`,
//! `1_000` or `2001-12-14` is a boolean, a number or a timestamp; a YAML 1.2 writer leaves
//! them plain, and then `cordon run --dry-run | kubectl apply -f -` is refused (an
//! environment value `IS_SANDBOX=yes`), or worse, takes a different value. So every string is
//! written plain only where no YAML version could read it as anything else (a letter or `/`
//! first, then letters, digits and `_./-`, and not one of the words either version reserves);
//! a text of several lines is a literal block where that keeps it exact; everything else is
//! double-quoted with every character that is not plainly printable escaped.

use std::fmt::Write;

use serde_json::Value;

/// `value` as a YAML document (without the `---` before it), ending in a line break.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    for line in node(value) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The lines of `value` as a block node, the first one to follow `key: ` or `- `, the others
/// indented by their parent.
fn node(value: &Value) -> Vec<String> {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let mut lines = Vec::new();
            for (k, v) in map {
                let key = scalar_line(k);
                match v {
                    Value::Object(m) if !m.is_empty() => {
                        lines.push(format!("{key}:"));
                        lines.extend(node(v).into_iter().map(|l| indent(&l)));
                    }
                    // A sequence under a key starts at the key's own column, as kubectl writes.
                    Value::Array(a) if !a.is_empty() => {
                        lines.push(format!("{key}:"));
                        lines.extend(node(v));
                    }
                    _ => {
                        let mut inner = node(v).into_iter();
                        lines.push(format!("{key}: {}", inner.next().unwrap_or_default()));
                        lines.extend(inner.map(|l| indent(&l)));
                    }
                }
            }
            lines
        }
        Value::Array(items) if !items.is_empty() => {
            let mut lines = Vec::new();
            for item in items {
                let mut inner = node(item).into_iter();
                lines.push(format!("- {}", inner.next().unwrap_or_default()));
                lines.extend(inner.map(|l| indent(&l)));
            }
            lines
        }
        Value::Object(_) => vec!["{}".into()],
        Value::Array(_) => vec!["[]".into()],
        Value::Null => vec!["null".into()],
        Value::Bool(b) => vec![b.to_string()],
        Value::Number(n) => vec![n.to_string()],
        Value::String(s) => match literal_block(s) {
            Some(lines) => lines,
            None => vec![scalar_line(s)],
        },
    }
}

/// A continuation line, two columns further in; an empty line stays empty.
fn indent(line: &str) -> String {
    if line.is_empty() {
        String::new()
    } else {
        format!("  {line}")
    }
}

/// The words YAML 1.1 or 1.2 reads as a boolean or a null, whatever their case.
const RESERVED: &[&str] = &["y", "yes", "n", "no", "true", "false", "on", "off", "null"];

/// `s` on one line: plain where that cannot be read as another type, else double-quoted.
fn scalar_line(s: &str) -> String {
    // A flag (`-c`, `--settings`) starts with a dash but is no number and no list item.
    let rest = s
        .strip_prefix("--")
        .or_else(|| s.strip_prefix('-'))
        .unwrap_or(s);
    let mut chars = rest.chars();
    let plain = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || (c == '/' && rest.len() == s.len()))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'))
        && !RESERVED.iter().any(|r| s.eq_ignore_ascii_case(r));
    if plain {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if printable(c) => out.push(c),
            c if (c as u32) <= 0xff => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) <= 0xffff => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// Whether `c` may stand as itself in a quoted or block scalar: YAML's printable characters,
/// less the ones YAML 1.1 takes for a line break (U+0085, U+2028, U+2029) and the byte order
/// mark.
fn printable(c: char) -> bool {
    matches!(c, ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// `s` as a literal block (`|` or `|-` and its lines), where that keeps it exact: several
/// lines, the first neither empty nor starting with a blank (which would set the block's
/// indentation), nothing but printable characters and tabs, and at most one line break at
/// the end.
fn literal_block(s: &str) -> Option<Vec<String>> {
    let body = s.strip_suffix('\n');
    let text = body.unwrap_or(s);
    let fits = text.contains('\n')
        && !text.ends_with('\n')
        && !text.starts_with([' ', '\t', '\n'])
        && text.chars().all(|c| c == '\n' || c == '\t' || printable(c));
    if !fits {
        return None;
    }
    let head = if body.is_some() { "|" } else { "|-" };
    Some(
        std::iter::once(head.to_string())
            .chain(text.split('\n').map(String::from))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Strings that a YAML 1.1 or 1.2 reader would take for another type, or change, if
    /// written plain or carelessly quoted.
    const AWKWARD: &[&str] = &[
        "yes",
        "No",
        "ON",
        "off",
        "y",
        "N",
        "true",
        "False",
        "null",
        "~",
        "",
        "0123",
        "1e3",
        "1_000",
        "0x1F",
        "0o17",
        "0b101",
        ".inf",
        "-.inf",
        ".NaN",
        "1:20",
        "2001-12-14",
        "2001-12-14t21:59:43.10-05:00",
        "<<",
        "=",
        "-",
        "- x",
        "? x",
        ": x",
        "a: b",
        "a #b",
        "#x",
        "[x]",
        "{x}",
        "*a",
        "&a",
        "!t",
        "%x",
        "@x",
        "`x",
        "|x",
        ">x",
        "'q'",
        "\"d\"",
        " lead",
        "trail ",
        "tab\there",
        "multi\nline",
        "multi\nline\n",
        "two\n\n",
        "\nlead",
        " indented\nblock",
        "cr\r\nlf",
        "del\u{7f}",
        "c1\u{85}",
        "ls\u{2028}ps\u{2029}",
        "bom\u{feff}",
        "bell\u{7}",
        "nul\u{0}",
        "é ü 日本",
        "emoji 🦀",
        "back\\slash",
        "line\n  indented\n\nafter blank",
        "/run/cordon",
        "cordon.dev/run",
        "a-b_c.d",
        "-c",
        "--settings",
        "---",
        "--",
        "-/x",
        "--/x",
        "-1",
        "--1",
    ];

    #[test]
    fn every_awkward_string_reads_back_as_itself() {
        for s in AWKWARD {
            let doc = json!({ *s: s, "list": [s, {"k": s}], "nested": {"v": s} });
            let text = to_string(&doc);
            let back: Value =
                serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{s:?}: {e}\n{text}"));
            assert_eq!(back, doc, "{s:?} written as\n{text}");
        }
    }

    #[test]
    fn the_usual_things_stay_readable() {
        let doc = json!({
            "apiVersion": "v1",
            "metadata": {"labels": {"cordon.dev/run": "cordon-0123"}, "name": "cordon-0123"},
            "spec": {
                "containers": [{"command": ["/bin/sh", "-c", "a\nb"], "env": []}],
                "volumes": [{"emptyDir": {}, "name": "ws"}],
                "automountServiceAccountToken": false,
                "activeDeadlineSeconds": 30,
                "ports": [[1, 2]],
            },
        });
        assert_eq!(
            to_string(&doc),
            "apiVersion: v1
metadata:
  labels:
    cordon.dev/run: cordon-0123
  name: cordon-0123
spec:
  activeDeadlineSeconds: 30
  automountServiceAccountToken: false
  containers:
  - command:
    - /bin/sh
    - -c
    - |-
      a
      b
    env: []
  ports:
  - - 1
    - 2
  volumes:
  - emptyDir: {}
    name: ws
"
        );
    }
}
