//! The text `argsPattern` regexes are matched against.
//!
//! Gemini CLI users write patterns against one exact serialisation of the arguments, so we
//! reproduce it: keys sorted, no whitespace, numbers as JavaScript prints them, and every
//! top-level `"key":value` pair wrapped in NUL characters (patterns use `\x00` to anchor on a
//! whole top-level field).

use serde_json::Value;

/// Serialises tool arguments for pattern matching.
pub fn stable_stringify(args: &Value) -> String {
    let mut out = String::with_capacity(64);
    write_value(args, true, &mut out);
    out
}

fn write_value(v: &Value, top_level: bool, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, false, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // serde_json's map is ordered by key (no `preserve_order` feature).
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if top_level {
                    out.push('\0');
                }
                write_string(k, out);
                out.push(':');
                write_value(v, false, out);
                if top_level {
                    out.push('\0');
                }
            }
            out.push('}');
        }
    }
}

fn write_number(n: &serde_json::Number, out: &mut String) {
    if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
        // JavaScript prints integral doubles without a fraction.
        if f.fract() == 0.0 && f.abs() < 1e21 {
            out.push_str(&format!("{}", f as i64));
            return;
        }
    }
    out.push_str(&n.to_string());
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_gemini_serialisation() {
        assert_eq!(
            stable_stringify(&json!({"dir_path": "/x", "command": "git status"})),
            "{\0\"command\":\"git status\"\0,\0\"dir_path\":\"/x\"\0}"
        );
        assert_eq!(
            stable_stringify(&json!({"a": {"b": 1.0, "a": [true, null]}})),
            "{\0\"a\":{\"a\":[true,null],\"b\":1}\0}"
        );
        assert_eq!(
            stable_stringify(&json!({"s": "q\"\u{1}"})),
            "{\0\"s\":\"q\\\"\\u0001\"\0}"
        );
    }
}
