//! Lines as cordon reads them from other programs (agents, the answerers of `--ask-domains`):
//! every line bounded, so that a runaway peer cannot make cordon hold unbounded memory.

use std::io::{BufRead, Read};

use anyhow::Context;

/// Longest request line read; a longer one is answered with an error and skipped, so a
/// runaway client cannot make cordon hold unbounded memory.
pub const MAX_LINE: usize = 1 << 20;

/// Reads one line into `buf` (without the newline). `None` at end of input; `Some(false)` if
/// the line was longer than `MAX_LINE` (the rest of it is consumed and dropped).
pub fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> anyhow::Result<Option<bool>> {
    buf.clear();
    let read = input
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', buf)
        .context("cannot read standard input")?;
    if read == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Some(true));
    }
    if buf.len() <= MAX_LINE {
        return Ok(Some(true)); // the last line, without a newline
    }
    // Too long: skip to the end of the line.
    loop {
        let chunk = input.fill_buf().context("cannot read standard input")?;
        if chunk.is_empty() {
            break;
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                break;
            }
            None => {
                let len = chunk.len();
                input.consume(len);
            }
        }
    }
    buf.clear();
    Ok(Some(false))
}
