//! What a run's output becomes: a bounded copy for the result (head and tail kept, the middle
//! counted), and text for JSON events cut only between characters.

use std::collections::VecDeque;

/// How much output a result keeps: the first `head` and the last `tail` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    pub head: usize,
    pub tail: usize,
}

impl Default for OutputLimit {
    /// Enough for a model to see how a build began and how it failed, small enough that
    /// sixteen runs at once hold about 2 MiB.
    fn default() -> Self {
        OutputLimit {
            head: 64 * 1024,
            tail: 64 * 1024,
        }
    }
}

/// The output kept for a result: never more than `head + tail` bytes however much arrives.
#[derive(Debug, Clone)]
pub struct BoundedOutput {
    limit: OutputLimit,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

/// The kept output, ready for a result.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeptOutput {
    /// The head, a line saying how many bytes were left out (if any), and the tail; invalid
    /// UTF-8 replaced by U+FFFD.
    pub text: String,
    /// Every byte the command wrote.
    pub total_bytes: u64,
    /// Bytes left out of `text`.
    pub elided_bytes: u64,
}

impl BoundedOutput {
    pub fn new(limit: OutputLimit) -> Self {
        BoundedOutput {
            limit,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        let room = self.limit.head - self.head.len();
        if room > 0 {
            let n = room.min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if self.limit.tail == 0 {
            return;
        }
        if data.len() >= self.limit.tail {
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.limit.tail..]);
            return;
        }
        let overflow = (self.tail.len() + data.len()).saturating_sub(self.limit.tail);
        self.tail.drain(..overflow);
        self.tail.extend(data);
    }

    pub fn finish(&self) -> KeptOutput {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let elided = self.total - kept;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if elided > 0 {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[… {elided} bytes of output left out …]\n"));
        }
        let (a, b) = self.tail.as_slices();
        let tail = [a, b].concat();
        text.push_str(&String::from_utf8_lossy(&tail));
        KeptOutput {
            text,
            total_bytes: self.total,
            elided_bytes: elided,
        }
    }
}

/// Turns a byte stream into text chunks without splitting a character across two of them:
/// an incomplete sequence at the end of one chunk waits for the next.
#[derive(Debug, Default)]
pub struct Utf8Chunks {
    pending: Vec<u8>,
}

impl Utf8Chunks {
    pub fn push(&mut self, data: &[u8]) -> String {
        self.pending.extend_from_slice(data);
        let keep = incomplete_suffix(&self.pending);
        let rest = self.pending.split_off(self.pending.len() - keep);
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending = rest;
        text
    }

    /// What is left at the end of the stream.
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

/// How many bytes at the end of `bytes` begin a UTF-8 sequence that is not yet complete.
fn incomplete_suffix(bytes: &[u8]) -> usize {
    for back in 1..=3.min(bytes.len()) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for the lead
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut o = BoundedOutput::new(OutputLimit { head: 4, tail: 4 });
        o.push(b"abc");
        o.push(b"def");
        let k = o.finish();
        assert_eq!(k.text, "abcdef");
        assert_eq!((k.total_bytes, k.elided_bytes), (6, 0));
    }

    #[test]
    fn large_output_keeps_head_and_tail_and_counts_the_middle() {
        let mut o = BoundedOutput::new(OutputLimit { head: 3, tail: 4 });
        for chunk in [&b"hea"[..], b"d-middle-", b"x", b"tail"] {
            o.push(chunk);
        }
        let k = o.finish();
        assert_eq!(k.total_bytes, 17);
        assert_eq!(k.elided_bytes, 10);
        assert_eq!(k.text, "hea\n[… 10 bytes of output left out …]\ntail");
        // One chunk bigger than everything.
        let mut o = BoundedOutput::new(OutputLimit { head: 2, tail: 2 });
        o.push(&[b'x'; 1000]);
        o.push(b"yz");
        assert_eq!(o.finish().elided_bytes, 998);
        assert!(o.finish().text.ends_with("yz"));
    }

    #[test]
    fn characters_are_never_split_between_chunks() {
        let text = "aé€😀b";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut d = Utf8Chunks::default();
            let mut out = d.push(&bytes[..cut]);
            out += &d.push(&bytes[cut..]);
            out += &d.finish();
            assert_eq!(out, text, "cut at {cut}");
        }
        let mut d = Utf8Chunks::default();
        assert_eq!(d.push(b"\xff"), "\u{fffd}");
    }
}
