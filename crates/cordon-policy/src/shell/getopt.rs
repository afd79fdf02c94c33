//! Options read the way `getopt_long` reads them, so that a wrapper's inner command and a
//! program's operands are found where the program itself finds them.
//!
//! A guess here is a bypass: `xargs -0I cat sort --outp=F` runs `sort`, not `cat`, because `-I`
//! at the end of a cluster takes the next word as its value. So every option a program has is
//! listed, an option the table does not know is an error (the caller refuses), and a word only
//! known at run time where an option could stand is an error too: it could be any option.

use super::words::Known;

/// Whether a long option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arg {
    No,
    /// `--name=value` or `--name value`.
    Required,
    /// Only `--name=value`; `--name` alone has none.
    Optional,
}

/// A program's options.
pub(super) struct Options {
    /// getopt's short-option string: a letter, then `:` when it takes a value, `::` when the
    /// value is optional (and then only attached: `-i{}`).
    pub short: &'static str,
    pub long: &'static [(&'static str, Arg)],
    /// `-NUMBER` is an option of its own (`nice -10`, `uniq -2`).
    pub numeric: bool,
    /// Operands and options may be mixed (GNU's default); otherwise the first operand ends
    /// the options (getopt's `+`, which every program that runs a command uses).
    pub permute: bool,
}

/// What reading the options found.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// Each option given, as its letter or long name, with its value.
    pub options: Vec<(String, Option<String>)>,
    /// For each option with a value, the index of the word the value is in.
    pub value_words: Vec<usize>,
    /// The indexes of the operands. Without `permute`, the first one is where the options
    /// ended and everything from there on is an operand.
    pub operands: Vec<usize>,
}

impl Found {
    pub fn has(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| n == name)
    }

    /// The index where the operands start (the inner command of a wrapper).
    pub fn first_operand(&self, len: usize) -> usize {
        self.operands.first().copied().unwrap_or(len)
    }
}

fn short_arg(spec: &str, c: char) -> Option<Arg> {
    if c == ':' {
        return None;
    }
    let at = spec.find(c)?;
    let rest = &spec[at + c.len_utf8()..];
    Some(if rest.starts_with("::") {
        Arg::Optional
    } else if rest.starts_with(':') {
        Arg::Required
    } else {
        Arg::No
    })
}

/// Resolves a long option as getopt_long does: an exact name, or an unambiguous prefix.
fn long_arg(opts: &Options, given: &str) -> Result<(&'static str, Arg), String> {
    if let Some(&(name, arg)) = opts.long.iter().find(|(n, _)| *n == given) {
        return Ok((name, arg));
    }
    let mut matches = opts.long.iter().filter(|(n, _)| n.starts_with(given));
    match (matches.next(), matches.next()) {
        (Some(&(name, arg)), None) => Ok((name, arg)),
        (Some(_), Some(_)) => Err(format!("`--{given}` is ambiguous")),
        (None, _) => Err(format!("`--{given}` is not an option cordon knows")),
    }
}

/// Reads `words[start..]`. `known` says, word by word, how much of each the analysis knows.
pub(super) fn read(
    words: &[String],
    known: &[Known],
    start: usize,
    opts: &Options,
) -> Result<Found, String> {
    let known_at = |i: usize| known.get(i).copied().unwrap_or(Known::Literal);
    let mut found = Found::default();
    let mut i = start;
    while i < words.len() {
        let word = words[i].as_str();
        if known_at(i) != Known::Literal {
            // `$x` could be `--output=F`, or several words.
            return Err(format!(
                "`{word}` is only known at run time, where an option could stand"
            ));
        }
        if word == "--" {
            found.operands.extend(i + 1..words.len());
            return Ok(found);
        }
        let is_option = word.len() > 1 && word.starts_with('-');
        if !is_option {
            found.operands.push(i);
            if !opts.permute {
                found.operands.extend(i + 1..words.len());
                return Ok(found);
            }
            i += 1;
            continue;
        }
        // The value an option takes from the next word, which must then be one word.
        let next_value = |i: &mut usize, name: &str| -> Result<String, String> {
            *i += 1;
            match (words.get(*i), known_at(*i)) {
                (None, _) => Err(format!("`{name}` needs a value")),
                (Some(w), Known::Words) => Err(format!(
                    "the value of `{name}`, `{w}`, may be several words at run time"
                )),
                (Some(w), _) => Ok(w.clone()),
            }
        };
        if let Some(long) = word.strip_prefix("--") {
            let (given, attached) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let (name, arg) = long_arg(opts, given)?;
            let value = match (arg, attached) {
                (Arg::No, Some(_)) => return Err(format!("`--{name}` takes no value")),
                (Arg::No, None) | (Arg::Optional, None) => None,
                (_, Some(v)) => Some(v),
                (Arg::Required, None) => Some(next_value(&mut i, word)?),
            };
            if value.is_some() {
                found.value_words.push(i);
            }
            found.options.push((name.to_string(), value));
            i += 1;
            continue;
        }
        let cluster = &word[1..];
        if opts.numeric && cluster.bytes().all(|b| b.is_ascii_digit()) {
            found.options.push((word.to_string(), None));
            i += 1;
            continue;
        }
        for (at, c) in cluster.char_indices() {
            let arg = short_arg(opts.short, c)
                .ok_or_else(|| format!("`-{c}` is not an option cordon knows"))?;
            let rest = &cluster[at + c.len_utf8()..];
            let value = match arg {
                Arg::No => {
                    found.options.push((c.to_string(), None));
                    continue;
                }
                Arg::Optional => (!rest.is_empty()).then(|| rest.to_string()),
                Arg::Required if rest.is_empty() => Some(next_value(&mut i, &format!("-{c}"))?),
                Arg::Required => Some(rest.to_string()),
            };
            if value.is_some() {
                found.value_words.push(i);
            }
            found.options.push((c.to_string(), value));
            break;
        }
        i += 1;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const XARGS: Options = Options {
        short: "0a:E:e::i::I:l::L:n:prs:txP:d:",
        long: &[
            ("null", Arg::No),
            ("arg-file", Arg::Required),
            ("max-args", Arg::Required),
            ("max-chars", Arg::Required),
            ("max-lines", Arg::Optional),
        ],
        numeric: false,
        permute: false,
    };

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    fn start(s: &str) -> Result<usize, String> {
        let w = words(s);
        let known = vec![Known::Literal; w.len()];
        read(&w, &known, 1, &XARGS).map(|f| f.first_operand(w.len()))
    }

    #[test]
    fn clusters_values_and_long_abbreviations() {
        // `-I` ends the cluster and takes the next word.
        assert_eq!(start("xargs -0I cat sort --outp=F"), Ok(3));
        assert_eq!(start("xargs -0Icat sort"), Ok(2));
        assert_eq!(start("xargs -i sort"), Ok(2));
        assert_eq!(start("xargs -n 1 sort"), Ok(3));
        assert_eq!(start("xargs --max-a 1 sort"), Ok(3));
        assert_eq!(start("xargs --max-a=1 sort"), Ok(2));
        assert_eq!(start("xargs --max-l sort"), Ok(2));
        assert_eq!(start("xargs -- -rm"), Ok(2));
        assert!(start("xargs --max sort").is_err(), "ambiguous");
        assert!(start("xargs -q sort").is_err(), "unknown");
        assert!(start("xargs --null=1 sort").is_err());
        assert!(start("xargs -n").is_err());
    }

    #[test]
    fn words_known_only_at_run_time() {
        let w = words("xargs $o sort");
        let known = [Known::Literal, Known::OneWord, Known::Literal];
        assert!(read(&w, &known, 1, &XARGS).is_err());
        let w = words("xargs -n $n sort");
        let one = [
            Known::Literal,
            Known::Literal,
            Known::OneWord,
            Known::Literal,
        ];
        assert_eq!(read(&w, &one, 1, &XARGS).map(|f| f.first_operand(4)), Ok(3));
        let many = [Known::Literal, Known::Literal, Known::Words, Known::Literal];
        assert!(read(&w, &many, 1, &XARGS).is_err());
    }

    #[test]
    fn permuting_programs_take_options_after_operands() {
        const UNIQ: Options = Options {
            short: "cdDf:is:uw:z",
            long: &[("skip-fields", Arg::Required)],
            numeric: true,
            permute: true,
        };
        let w = words("uniq - out -f 1 -2");
        let found = read(&w, &[], 1, &UNIQ).expect("reads");
        assert_eq!(found.operands, [1, 2]);
        assert_eq!(found.options[0], ("f".to_string(), Some("1".to_string())));
        assert_eq!(found.value_words, [4]);
        assert!(found.has("-2"));
    }
}
