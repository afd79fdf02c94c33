//! The range of every number cordon takes from a request (`exec`'s JSON lines, `mcp`'s tool
//! arguments, the domain questions' answers), a settings file or a flag.
//!
//! A number out of its range is an error naming the field and the range, never a panic
//! (`Duration::from_secs_f64` panics on a large finite value) nor a limit that silently means
//! none (`RLIMIT_CPU` of `u64::MAX` is "unlimited").

use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer};

/// Where a number must lie.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    pub min: f64,
    pub max: f64,
    /// Only whole numbers.
    pub whole: bool,
    /// What it counts, after the number in the error (" seconds").
    pub unit: &'static str,
}

/// Seconds a command may run: a year at most, so the timer's arithmetic stays finite.
pub const TIMEOUT: Range = Range {
    min: 0.001,
    max: 31_536_000.0,
    whole: false,
    unit: " seconds",
};
/// The kernel's own largest pid_max (`PID_MAX_LIMIT` on 64-bit).
pub const MAX_PROCESSES: Range = Range {
    min: 1.0,
    max: 4_194_304.0,
    whole: true,
    unit: "",
};
/// Commands of one `exec` or `mcp` session running at once. Each gets a share of the session's
/// processes, and a share below a few hundred stops ordinary builds.
pub const MAX_COMMANDS: Range = Range {
    min: 1.0,
    max: 256.0,
    whole: true,
    unit: "",
};
/// CPU seconds per process; a year at most, so no value turns into `RLIM_INFINITY`.
pub const CPU_TIME: Range = Range {
    min: 1.0,
    max: 31_536_000.0,
    whole: true,
    unit: " seconds",
};
pub const CPUS: Range = Range {
    min: 0.001,
    max: 4096.0,
    whole: false,
    unit: "",
};
/// Below a mebibyte nothing starts; a pebibyte is more than any machine has.
pub const MEMORY: Range = Range {
    min: (1u64 << 20) as f64,
    max: (1u64 << 50) as f64,
    whole: true,
    unit: " bytes (1M to 1048576G)",
};
/// Bytes of output a run keeps for its result (`exec`'s `max_output`).
pub const MAX_OUTPUT: Range = Range {
    min: 0.0,
    max: (16u64 << 20) as f64,
    whole: true,
    unit: " bytes",
};
/// Rows or columns of a terminal.
pub const TERMINAL_SIZE: Range = Range {
    min: 1.0,
    max: 4096.0,
    whole: true,
    unit: "",
};
/// A line number, or a count of lines or occurrences, in an `mcp` file tool's arguments.
pub const LINES: Range = Range {
    min: 0.0,
    max: 1_000_000_000.0,
    whole: true,
    unit: "",
};
/// What JSON carries exactly (2^53 - 1): the ids of the domain questions.
pub const JSON_ID: Range = Range {
    min: 1.0,
    max: 9_007_199_254_740_991.0,
    whole: true,
    unit: "",
};

impl Range {
    /// `n` if it lies in the range, else what is wrong, to follow the field's name.
    pub fn check(&self, n: f64) -> Result<f64, String> {
        if n.is_finite() && n >= self.min && n <= self.max && (!self.whole || n.fract() == 0.0) {
            return Ok(n);
        }
        Err(format!("{}, not {}", self.wants(), shown(n)))
    }

    /// "must be a whole number from 1 to 4096".
    fn wants(&self) -> String {
        format!(
            "must be {} from {} to {}{}",
            if self.whole {
                "a whole number"
            } else {
                "a number"
            },
            self.min,
            self.max,
            self.unit
        )
    }

    /// The same for a whole number held as an integer.
    pub fn check_whole(&self, n: u64) -> Result<u64, String> {
        self.check(n as f64).map(|_| n)
    }

    /// `text` as a number in the range (a flag's value).
    pub fn parse(&self, text: &str) -> Result<f64, String> {
        let n: f64 = text.trim().parse().map_err(|_| {
            format!(
                "`{text}` is not a number; give one from {} to {}{}",
                self.min, self.max, self.unit
            )
        })?;
        self.check(n)
    }
}

/// `n` as written: `3`, `0.5`, and `1e300` rather than its three hundred digits.
fn shown(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n}")
    } else {
        format!("{n:?}")
    }
}

/// A number in [`TIMEOUT`] as a duration, which the range keeps from panicking.
pub fn timeout(seconds: f64) -> Result<Duration, String> {
    TIMEOUT.check(seconds).map(Duration::from_secs_f64)
}

/// A size (`512M`, `4G`) in [`MEMORY`], in bytes.
pub fn memory(text: &str) -> Result<u64, String> {
    let bytes = crate::settings::parse_size(text)
        .map_err(|e| format!("{e}; give a size from 1M to 1048576G"))?;
    MEMORY
        .check_whole(bytes)
        .map_err(|_| format!("`{text}` is out of range; give a size from 1M to 1048576G"))
}

/// Any number, whatever the format calls it (TOML's integers and floats, JSON's numbers).
struct Number(f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl de::Visitor<'_> for Visit {
            type Value = Number;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Number, E> {
                Ok(Number(n as f64))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Number, E> {
                Ok(Number(n as f64))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Number, E> {
                Ok(Number(n))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Reads a number held to `range`; an error names `field`.
pub fn number<'de, D: Deserializer<'de>>(
    d: D,
    field: &str,
    range: &Range,
) -> Result<f64, D::Error> {
    let Number(n) = Number::deserialize(d)
        .map_err(|e| de::Error::custom(format!("`{field}` {}: {e}", range.wants())))?;
    range
        .check(n)
        .map_err(|e| de::Error::custom(format!("`{field}` {e}")))
}

/// The same, where the field may be left out or `null`.
pub fn optional<'de, D: Deserializer<'de>>(
    d: D,
    field: &str,
    range: &Range,
) -> Result<Option<f64>, D::Error> {
    let n = Option::<Number>::deserialize(d)
        .map_err(|e| de::Error::custom(format!("`{field}` {}: {e}", range.wants())))?;
    n.map(|Number(n)| {
        range
            .check(n)
            .map_err(|e| de::Error::custom(format!("`{field}` {e}")))
    })
    .transpose()
}

/// `deserialize_with` functions, one per field, so that each error names its field.
macro_rules! fields {
    ($($name:ident: $field:literal, $range:expr, $ty:ty;)*) => {$(
        pub fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<$ty>, D::Error> {
            optional(d, $field, &$range).map(|n| n.map(|n| n as $ty))
        }
    )*};
}

fields! {
    limits_timeout: "limits.timeout", TIMEOUT, f64;
    limits_max_processes: "limits.max_processes", MAX_PROCESSES, u64;
    limits_max_commands: "limits.max_commands", MAX_COMMANDS, u64;
    limits_max_session_processes: "limits.max_session_processes", MAX_PROCESSES, u64;
    limits_cpu_time: "limits.cpu_time", CPU_TIME, u64;
    limits_cpus: "limits.cpus", CPUS, f64;
    request_timeout: "timeout", TIMEOUT, f64;
    request_max_output: "max_output", MAX_OUTPUT, usize;
    read_offset: "offset", LINES, u64;
    read_limit: "limit", LINES, u64;
    expected_replacements: "expected_replacements", LINES, u64;
}

/// `rows` of a terminal (`exec`'s `pty` and `resize`).
pub fn terminal_rows<'de, D: Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
    number(d, "rows", &TERMINAL_SIZE).map(|n| n as u16)
}

/// `cols` of a terminal.
pub fn terminal_cols<'de, D: Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
    number(d, "cols", &TERMINAL_SIZE).map(|n| n as u16)
}

/// `id` of an answer to a domain question.
pub fn question_id<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    number(d, "id", &JSON_ID).map(|n| n as u64)
}

/// `limits.memory`: a size string in [`MEMORY`].
pub fn limits_memory<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let text = Option::<String>::deserialize(d).map_err(|e| {
        de::Error::custom(format!(
            "`limits.memory` must be a size from 1M to 1048576G: {e}"
        ))
    })?;
    if let Some(t) = &text {
        memory(t).map_err(|e| de::Error::custom(format!("`limits.memory`: {e}")))?;
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_numbers_are_named_with_their_range() {
        assert!(timeout(1e300).unwrap_err().contains("31536000 seconds"));
        assert!(timeout(f64::NAN).is_err());
        assert!(timeout(0.0).is_err());
        assert_eq!(timeout(1.5), Ok(Duration::from_millis(1500)));
        assert!(MAX_PROCESSES.check(1.5).unwrap_err().contains("whole"));
        assert!(CPU_TIME.check_whole(u64::MAX).is_err());
        assert!(memory("1K").unwrap_err().contains("1M to 1048576G"));
        assert_eq!(memory("1M"), Ok(1 << 20));
        assert!(TIMEOUT.parse("soon").unwrap_err().contains("not a number"));
    }

    #[test]
    fn a_field_read_from_json_or_toml_is_named() {
        #[derive(Debug, serde::Deserialize)]
        struct T {
            #[serde(default, deserialize_with = "limits_timeout")]
            #[allow(dead_code)]
            timeout: Option<f64>,
        }
        let e = serde_json::from_str::<T>(r#"{"timeout": 1e300}"#).unwrap_err();
        assert!(e.to_string().contains("`limits.timeout` must be"), "{e}");
        let e = serde_json::from_str::<T>(r#"{"timeout": "x"}"#).unwrap_err();
        assert!(
            e.to_string().contains(
                "`limits.timeout` must be a number from 0.001 to 31536000 seconds: invalid type"
            ),
            "{e}"
        );
        let e = toml::from_str::<T>("\ntimeout = 1e300\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(serde_json::from_str::<T>(r#"{"timeout": null}"#).is_ok());
        assert!(toml::from_str::<T>("timeout = 3\n").is_ok());
    }
}
