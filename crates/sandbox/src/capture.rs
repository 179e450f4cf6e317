//! Bounded capture of one output stream: the first and the last characters
//! the child wrote, a count of every byte, and nothing in between.
//!
//! Memory is fixed by the character budget, whatever the child writes: the
//! head is a buffer that stops growing at its budget, the tail a ring buffer
//! that overwrites its oldest bytes. Budgets are kept in bytes (4 per
//! character, the UTF-8 maximum) and cut into characters only in `finish`,
//! so `push` is a plain copy and the drain keeps up with `cat > /dev/null`.
//!
//! Invalid UTF-8 is replaced lossily (one U+FFFD per invalid sequence, as
//! `String::from_utf8_lossy` does) while the omitted-bytes count refers to
//! the raw bytes, so `head + omitted + tail == bytes` always holds.

/// One stream as the model will see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// Head and tail joined by a marker when truncated; valid UTF-8.
    pub text: String,
    /// Every byte the child wrote, kept or not.
    pub bytes: u64,
    pub truncated: bool,
}

/// The worst-case UTF-8 length of one character, and of one replacement:
/// an invalid sequence as `utf8_chunks` reports it is at most 3 bytes.
const MAX_CHAR_BYTES: usize = 4;

/// Fixed-size ring holding the most recent bytes written into it.
#[derive(Debug)]
struct Ring {
    /// Allocated on first use: most runs never fill their head.
    buf: Vec<u8>,
    cap: usize,
    /// Next write position.
    pos: usize,
    len: usize,
    /// Bytes overwritten (or never stored when `cap` is 0).
    dropped: u64,
}

impl Ring {
    fn new(cap: usize) -> Self {
        Ring {
            buf: Vec::new(),
            cap,
            pos: 0,
            len: 0,
            dropped: 0,
        }
    }

    fn push(&mut self, data: &[u8]) {
        let n = data.len();
        if self.cap == 0 {
            self.dropped += n as u64;
            return;
        }
        if self.buf.len() != self.cap {
            self.buf = vec![0; self.cap];
        }
        if n >= self.cap {
            self.dropped += (self.len + n - self.cap) as u64;
            self.buf.copy_from_slice(&data[n - self.cap..]);
            self.pos = 0;
            self.len = self.cap;
            return;
        }
        let first = (self.cap - self.pos).min(n);
        self.buf[self.pos..self.pos + first].copy_from_slice(&data[..first]);
        self.buf[..n - first].copy_from_slice(&data[first..]);
        self.pos = (self.pos + n) % self.cap;
        let len = self.len + n;
        if len > self.cap {
            self.dropped += (len - self.cap) as u64;
            self.len = self.cap;
        } else {
            self.len = len;
        }
    }

    /// The stored bytes, oldest first, as two slices.
    fn slices(&self) -> (&[u8], &[u8]) {
        if self.len < self.cap {
            // Never wrapped: the data starts at 0.
            (&self.buf[..self.len], &[])
        } else {
            (&self.buf[self.pos..], &self.buf[..self.pos])
        }
    }
}

/// Head and tail of one stream within a fixed character budget.
#[derive(Debug)]
pub(crate) struct Capture {
    head_chars: usize,
    tail_chars: usize,
    head: Vec<u8>,
    head_cap: usize,
    tail: Ring,
    total: u64,
}

impl Capture {
    /// Keeps up to `max_chars` characters: the first half (rounded up) from
    /// the start of the stream, the rest from its end.
    pub(crate) fn new(max_chars: usize) -> Self {
        let head_chars = max_chars.div_ceil(2);
        let tail_chars = max_chars - head_chars;
        let head_cap = head_chars.saturating_mul(MAX_CHAR_BYTES);
        Capture {
            head_chars,
            tail_chars,
            head: Vec::new(),
            head_cap,
            tail: Ring::new(tail_chars.saturating_mul(MAX_CHAR_BYTES)),
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let room = self.head_cap - self.head.len();
        let (to_head, rest) = data.split_at(room.min(data.len()));
        let need = self.head.len() + to_head.len();
        if need > self.head.capacity() {
            // Grow geometrically but never past the budget, so the head's
            // allocation is bounded by it, not by Vec's doubling.
            let want = (self.head.len() * 2).max(need).max(256).min(self.head_cap);
            self.head.reserve_exact(want - self.head.len());
        }
        self.head.extend_from_slice(to_head);
        if !rest.is_empty() {
            self.tail.push(rest);
        }
    }

    /// The stream as the model sees it.
    pub(crate) fn finish(self) -> Captured {
        let max_chars = self.head_chars + self.tail_chars;
        if self.tail.dropped == 0 {
            // Everything is still here: decide on the exact character count.
            let (a, b) = self.tail.slices();
            let mut full = self.head;
            full.extend_from_slice(a);
            full.extend_from_slice(b);
            let Some(head_end) = after_chars(&full, self.head_chars) else {
                return whole(&full, self.total);
            };
            let count = self.head_chars + count_chars(&full[head_end..]);
            if count <= max_chars {
                return whole(&full, self.total);
            }
            let tail_start =
                match after_chars(&full[head_end..], count - self.head_chars - self.tail_chars) {
                    Some(skip) => head_end + skip,
                    None => full.len(),
                };
            return joined(&full[..head_end], &full[tail_start..], self.total);
        }
        // Bytes were dropped, so the stream holds more than 4 * max_chars
        // bytes, hence more than max_chars characters: it is truncated.
        // The head buffer is full; its last bytes may be a character cut by
        // the buffer's end, but the first head_chars characters lie before
        // it (4h - 3 bytes need at least h characters).
        let head_end = after_chars(&self.head, self.head_chars).unwrap_or(self.head.len());
        let (a, b) = self.tail.slices();
        let mut tail = Vec::with_capacity(a.len() + b.len());
        tail.extend_from_slice(a);
        tail.extend_from_slice(b);
        // The ring's oldest bytes may continue a character whose lead byte
        // was overwritten: skip them rather than show a spurious U+FFFD.
        let skip = tail
            .iter()
            .take(MAX_CHAR_BYTES - 1)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count();
        let tail = &tail[skip..];
        let n = count_chars(tail);
        let tail_start = match after_chars(tail, n.saturating_sub(self.tail_chars)) {
            Some(off) => off,
            None => tail.len(),
        };
        joined(&self.head[..head_end], &tail[tail_start..], self.total)
    }
}

fn whole(bytes: &[u8], total: u64) -> Captured {
    Captured {
        text: String::from_utf8_lossy(bytes).into_owned(),
        bytes: total,
        truncated: false,
    }
}

fn joined(head: &[u8], tail: &[u8], total: u64) -> Captured {
    let omitted = total - head.len() as u64 - tail.len() as u64;
    let head = String::from_utf8_lossy(head);
    let tail = String::from_utf8_lossy(tail);
    let mut text = String::with_capacity(head.len() + tail.len() + 48);
    text.push_str(&head);
    text.push_str("\n[... ");
    text.push_str(&omitted.to_string());
    text.push_str(" bytes omitted ...]\n");
    text.push_str(&tail);
    Captured {
        text,
        bytes: total,
        truncated: true,
    }
}

/// Calls `f` with the raw length of each character `from_utf8_lossy` would
/// produce (a valid character, or one invalid sequence) until it says stop.
fn walk(bytes: &[u8], mut f: impl FnMut(usize) -> bool) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if !f(c.len_utf8()) {
                return;
            }
        }
        if !chunk.invalid().is_empty() && !f(chunk.invalid().len()) {
            return;
        }
    }
}

/// Byte offset just after the first `n` characters, `None` when there are
/// fewer.
fn after_chars(bytes: &[u8], n: usize) -> Option<usize> {
    if n == 0 {
        return Some(0);
    }
    let (mut seen, mut off) = (0, 0);
    walk(bytes, |len| {
        off += len;
        seen += 1;
        seen < n
    });
    (seen == n).then_some(off)
}

fn count_chars(bytes: &[u8]) -> usize {
    let mut n = 0;
    walk(bytes, |_| {
        n += 1;
        true
    });
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(max: usize, chunks: &[&[u8]]) -> Captured {
        let mut c = Capture::new(max);
        for ch in chunks {
            c.push(ch);
        }
        c.finish()
    }

    /// The omitted count the marker states.
    fn omitted(text: &str) -> u64 {
        let start = text.find("[... ").unwrap() + 5;
        let end = text[start..].find(' ').unwrap() + start;
        text[start..end].parse().unwrap()
    }

    #[test]
    fn small_output_is_kept_exactly() {
        let c = capture(100, &[b"hello ", b"world\n"]);
        assert_eq!(c.text, "hello world\n");
        assert_eq!(c.bytes, 12);
        assert!(!c.truncated);
    }

    #[test]
    fn empty_stream() {
        let c = capture(10, &[]);
        assert_eq!(c, Captured::default());
    }

    #[test]
    fn exactly_the_budget_is_not_truncated() {
        let c = capture(2, &["hé".as_bytes()]);
        assert_eq!(c.text, "hé");
        assert!(!c.truncated);
        let c = capture(5, &["héllo".as_bytes()]);
        assert_eq!(c.text, "héllo");
        assert!(!c.truncated);
    }

    #[test]
    fn head_and_tail_with_exact_omitted_count() {
        let data: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let c = capture(10, &[&data]);
        assert!(c.truncated);
        assert_eq!(c.bytes, 1000);
        let expected = format!(
            "{}\n[... 990 bytes omitted ...]\n{}",
            std::str::from_utf8(&data[..5]).unwrap(),
            std::str::from_utf8(&data[995..]).unwrap()
        );
        assert_eq!(c.text, expected);
    }

    #[test]
    fn truncation_without_dropping_counts_characters() {
        // 12 chars of 2 bytes: 24 bytes fit the 4-byte-per-char buffers of
        // a 10-char budget, yet exceed 10 characters.
        let s = "éééééééééééé";
        let c = capture(10, &[s.as_bytes()]);
        assert!(c.truncated);
        assert_eq!(c.text, "ééééé\n[... 4 bytes omitted ...]\nééééé");
    }

    #[test]
    fn chunking_does_not_change_the_result() {
        let mut data = Vec::new();
        for i in 0..5000u32 {
            data.extend_from_slice(format!("{i}€ü\u{1F600}").as_bytes());
            if i % 97 == 0 {
                data.push(0xFF);
            }
        }
        let reference = capture(301, &[&data]);
        for size in [1, 2, 3, 5, 7, 64, 1000, 4096] {
            let chunks: Vec<&[u8]> = data.chunks(size).collect();
            assert_eq!(capture(301, &chunks), reference, "chunk size {size}");
        }
        assert!(reference.truncated);
        assert_eq!(reference.bytes, data.len() as u64);
    }

    #[test]
    fn multibyte_characters_cut_mid_sequence_stay_whole() {
        // Each "€" is 3 bytes: budgets in bytes never line up with them, so
        // both cuts fall inside a character.
        let s = "€".repeat(10_000);
        let c = capture(7, &[s.as_bytes()]);
        assert!(c.truncated);
        let (head, rest) = c.text.split_once('\n').unwrap();
        let tail = rest.rsplit_once('\n').unwrap().1;
        assert_eq!(head, "€€€€");
        assert_eq!(tail, "€€€");
        assert!(!c.text.contains('\u{FFFD}'));
        assert_eq!(omitted(&c.text), 30_000 - 7 * 3);
    }

    #[test]
    fn four_byte_characters_at_every_offset() {
        for pad in 0..4 {
            let mut data = vec![b'x'; pad];
            data.extend_from_slice("\u{1F600}".repeat(500).as_bytes());
            data.extend(std::iter::repeat_n(b'y', pad));
            let c = capture(9, &[&data]);
            assert!(!c.text.contains('\u{FFFD}'), "pad {pad}: {}", c.text);
            let kept: usize = c.text.split_once('\n').unwrap().0.len()
                + c.text.rsplit_once('\n').unwrap().1.len();
            assert_eq!(kept as u64 + omitted(&c.text), data.len() as u64);
        }
    }

    #[test]
    fn invalid_bytes_are_replaced_and_still_counted() {
        let c = capture(100, &[b"ok\xFF\xFEend"]);
        assert_eq!(c.text, "ok\u{FFFD}\u{FFFD}end");
        assert_eq!(c.bytes, 7);
        // Truncated: the replacement characters count as characters, the
        // omitted count stays in raw bytes.
        let mut data = b"\xC3".to_vec();
        data.extend(std::iter::repeat_n(b'a', 100));
        data.extend_from_slice(b"\xE2\x82");
        let c = capture(4, &[&data]);
        assert!(c.truncated);
        assert!(c.text.starts_with("\u{FFFD}a\n"));
        assert!(c.text.ends_with("\na\u{FFFD}"));
        assert_eq!(omitted(&c.text), 103 - 2 - 3);
    }

    #[test]
    fn zero_budget_keeps_only_the_count() {
        let c = capture(0, &[b"abc"]);
        assert!(c.truncated);
        assert_eq!(c.text, "\n[... 3 bytes omitted ...]\n");
        assert_eq!(c.bytes, 3);
    }

    #[test]
    fn memory_stays_bounded() {
        let mut c = Capture::new(1000);
        let block = vec![b'z'; 1 << 16];
        for _ in 0..2000 {
            c.push(&block);
        }
        assert!(c.head.capacity() <= 4 * 1000);
        assert!(c.tail.buf.capacity() <= 4 * 1000);
        let out = c.finish();
        assert_eq!(out.bytes, 2000 << 16);
        assert_eq!(omitted(&out.text), (2000 << 16) - 1000);
    }

    /// Pieces the generated streams are made of: ASCII, 2-, 3- and 4-byte
    /// characters, stray continuation bytes, truncated sequences, 0xFF.
    const PIECES: &[&[u8]] = &[
        b"a",
        b"\n",
        "é".as_bytes(),
        "€".as_bytes(),
        "\u{1F600}".as_bytes(),
        b"\x80",
        b"\xE2\x82",
        b"\xF0\x9F",
        b"\xFF",
    ];

    proptest::proptest! {
        #[test]
        fn head_and_tail_are_the_stream_s_own_ends(
            pieces in proptest::collection::vec(0..PIECES.len(), 0..400),
            max in 0usize..40,
            chunk in 1usize..50,
        ) {
            let data: Vec<u8> = pieces.iter().flat_map(|i| PIECES[*i].iter().copied()).collect();
            let chunks: Vec<&[u8]> = data.chunks(chunk).collect();
            let c = capture(max, &chunks);
            let full = String::from_utf8_lossy(&data);
            proptest::prop_assert_eq!(c.bytes, data.len() as u64);
            if full.chars().count() <= max {
                proptest::prop_assert!(!c.truncated);
                proptest::prop_assert_eq!(&c.text, &full);
            } else {
                proptest::prop_assert!(c.truncated);
                let (head, rest) = c.text.split_once("\n[... ").unwrap();
                let tail = rest.split_once(" bytes omitted ...]\n").unwrap().1;
                proptest::prop_assert_eq!(head.chars().count(), max.div_ceil(2));
                proptest::prop_assert_eq!(tail.chars().count(), max / 2);
                proptest::prop_assert!(full.starts_with(head));
                proptest::prop_assert!(full.ends_with(tail));
                proptest::prop_assert!(omitted(&c.text) <= data.len() as u64);
            }
        }
    }
}
