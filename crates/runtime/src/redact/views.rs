//! Decoded views of a text, each byte knowing where it came from, so a secret found decoded is
//! redacted where it was written.
//!
//! A view undoes one kind of escaping: JSON's (`\"`, `\\`, `\/`, `\n`…, `\uXXXX` with surrogate
//! pairs), percent-encoding (`%XX` in either hex case; every space, written or decoded, becomes
//! `+`, the form's space, so `+` and `%20` read alike), or HTML's character references
//! (`&amp;`, `&#43;`, `&#x2B;`…). Views are made of views up to [`MAX_DEPTH`] deep (a JSON text
//! quoted in a JSON string, a percent-encoded URL inside JSON), only where the text holds the
//! escape's marker and only when decoding changes something.

use std::ops::Range;

/// Decodings applied on top of each other at most.
const MAX_DEPTH: usize = 3;
/// Decoded views made of one text at most.
const MAX_VIEWS: usize = 12;

/// One decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoder {
    Json,
    Percent,
    Html,
}

impl Decoder {
    const ALL: [Decoder; 3] = [Decoder::Json, Decoder::Percent, Decoder::Html];

    fn marker(self) -> u8 {
        match self {
            Decoder::Json => b'\\',
            Decoder::Percent => b'%',
            Decoder::Html => b'&',
        }
    }

    fn decode(self, input: &[u8]) -> Option<Decoded> {
        match self {
            Decoder::Json => json(input),
            Decoder::Percent => percent(input),
            Decoder::Html => html(input),
        }
    }
}

/// Whether a text holds an escape any decoder reads (the cheap test before making views).
pub(super) fn has_escapes(text: &[u8]) -> bool {
    memchr::memchr3(b'\\', b'%', b'&', text).is_some()
}

/// A decoded text: its bytes, and for each the offset in its input where its escape starts.
struct Decoded {
    bytes: Vec<u8>,
    starts: Vec<u32>,
}

impl Decoded {
    fn with_capacity(n: usize) -> Self {
        Decoded {
            bytes: Vec::with_capacity(n),
            starts: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, byte: u8, start: usize) {
        self.bytes.push(byte);
        self.starts.push(u32::try_from(start).unwrap_or(u32::MAX));
    }

    fn push_char(&mut self, c: char, start: usize) {
        let mut buf = [0u8; 4];
        for b in c.encode_utf8(&mut buf).bytes() {
            self.push(b, start);
        }
    }
}

/// A decoded view: its bytes, where each came from in its parent, and its parent.
pub(super) struct View {
    pub bytes: Vec<u8>,
    starts: Vec<u32>,
    /// The index of the view it was decoded from, `None` for the text itself.
    parent: Option<usize>,
    /// The length of the input it was decoded from.
    input_len: usize,
}

/// Every decoded view of `text` (not the text itself), parents before children.
pub(super) fn decoded_views(text: &[u8]) -> Vec<View> {
    let mut views: Vec<View> = Vec::new();
    // (input index: None for the text, depth of the input)
    let mut queue: Vec<(Option<usize>, usize)> = vec![(None, 0)];
    let mut next = 0;
    while next < queue.len() {
        let (input, depth) = queue[next];
        next += 1;
        if depth >= MAX_DEPTH {
            continue;
        }
        for decoder in Decoder::ALL {
            if views.len() >= MAX_VIEWS {
                return views;
            }
            let bytes = match input {
                None => text,
                Some(i) => &views[i].bytes,
            };
            if memchr::memchr(decoder.marker(), bytes).is_none() {
                continue;
            }
            if let Some(d) = decoder.decode(bytes) {
                let input_len = bytes.len();
                views.push(View {
                    bytes: d.bytes,
                    starts: d.starts,
                    parent: input,
                    input_len,
                });
                queue.push((Some(views.len() - 1), depth + 1));
            }
        }
    }
    views
}

/// The range of the text that view `index`'s `range` was decoded from.
pub(super) fn to_text(views: &[View], mut index: usize, mut range: Range<usize>) -> Range<usize> {
    loop {
        let Some(view) = views.get(index) else {
            return range;
        };
        range = view.to_input(range);
        match view.parent {
            Some(p) => index = p,
            None => return range,
        }
    }
}

impl View {
    /// The input bytes `range` of this view was decoded from: every escape it touches, whole.
    fn to_input(&self, range: Range<usize>) -> Range<usize> {
        let at = |i: usize| self.starts.get(i).map(|&s| s as usize);
        let Some(start) = at(range.start) else {
            return self.input_len..self.input_len;
        };
        let last = range.end.checked_sub(1).and_then(at).unwrap_or(start);
        // The input of the last byte ends where the next escape (a byte from elsewhere) starts.
        let end = self
            .starts
            .get(range.end..)
            .unwrap_or_default()
            .iter()
            .map(|&s| s as usize)
            .find(|&s| s > last)
            .unwrap_or(self.input_len);
        start..end.max(start)
    }
}

fn hex(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

fn hex_n(bytes: &[u8]) -> Option<u32> {
    bytes
        .iter()
        .try_fold(0u32, |acc, &b| Some(acc.checked_mul(16)? + hex(b)?))
}

/// JSON string escapes undone; `None` when there is none.
fn json(input: &[u8]) -> Option<Decoded> {
    let mut out = Decoded::with_capacity(input.len());
    let mut changed = false;
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b != b'\\' {
            out.push(b, i);
            i += 1;
            continue;
        }
        let simple = match input.get(i + 1) {
            Some(b'"') => Some(b'"'),
            Some(b'\\') => Some(b'\\'),
            Some(b'/') => Some(b'/'),
            Some(b'b') => Some(0x08),
            Some(b'f') => Some(0x0c),
            Some(b'n') => Some(b'\n'),
            Some(b'r') => Some(b'\r'),
            Some(b't') => Some(b'\t'),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c, i);
            changed = true;
            i += 2;
        } else if let Some((c, len)) = json_unicode(&input[i..]) {
            out.push_char(c, i);
            changed = true;
            i += len;
        } else {
            out.push(b, i);
            i += 1;
        }
    }
    changed.then_some(out)
}

/// A `\uXXXX` escape (two for a surrogate pair) at the start of `s`: the character and the
/// bytes it takes. A lone surrogate reads as U+FFFD, as serde_json reads it.
fn json_unicode(s: &[u8]) -> Option<(char, usize)> {
    let unit = |at: usize| -> Option<u32> {
        if s.get(at..at + 2)? != b"\\u" {
            return None;
        }
        hex_n(s.get(at + 2..at + 6)?)
    };
    let high = unit(0)?;
    if (0xD800..0xDC00).contains(&high)
        && let Some(low) = unit(6)
        && (0xDC00..0xE000).contains(&low)
    {
        let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
        return Some((char::from_u32(c).unwrap_or('\u{FFFD}'), 12));
    }
    Some((char::from_u32(high).unwrap_or('\u{FFFD}'), 6))
}

/// Percent-encoding undone, every space as `+`; `None` when there is no `%XX`.
fn percent(input: &[u8]) -> Option<Decoded> {
    let mut out = Decoded::with_capacity(input.len());
    let mut changed = false;
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        let decoded = if b == b'%' {
            input
                .get(i + 1..i + 3)
                .and_then(hex_n)
                .and_then(|v| u8::try_from(v).ok())
        } else {
            None
        };
        match decoded {
            Some(v) => {
                out.push(if v == b' ' { b'+' } else { v }, i);
                changed = true;
                i += 3;
            }
            None => {
                out.push(if b == b' ' { b'+' } else { b }, i);
                i += 1;
            }
        }
    }
    changed.then_some(out)
}

/// HTML character references undone (the named ones an encoder writes for ASCII, and numeric
/// ones); `None` when there is none.
fn html(input: &[u8]) -> Option<Decoded> {
    let mut out = Decoded::with_capacity(input.len());
    let mut changed = false;
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'&'
            && let Some((c, len)) = html_reference(&input[i..])
        {
            out.push_char(c, i);
            changed = true;
            i += len;
        } else {
            out.push(input[i], i);
            i += 1;
        }
    }
    changed.then_some(out)
}

/// A character reference at the start of `s` (which starts with `&`): the character and the
/// bytes it takes.
fn html_reference(s: &[u8]) -> Option<(char, usize)> {
    let end = s.iter().take(12).position(|&b| b == b';')?;
    let name = &s[1..end];
    let c = match name {
        b"amp" => '&',
        b"lt" => '<',
        b"gt" => '>',
        b"quot" => '"',
        b"apos" => '\'',
        b"nbsp" => '\u{a0}',
        [b'#', b'x' | b'X', digits @ ..] if !digits.is_empty() => char::from_u32(hex_n(digits)?)?,
        [b'#', digits @ ..] if !digits.is_empty() => {
            let n = digits.iter().try_fold(0u32, |acc, &b| {
                acc.checked_mul(10)?.checked_add((b as char).to_digit(10)?)
            })?;
            char::from_u32(n)?
        }
        _ => return None,
    };
    Some((c, end + 1))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The text each decoded occurrence of `needle` maps back to.
    fn found(text: &str, needle: &str) -> Vec<String> {
        let views = decoded_views(text.as_bytes());
        let mut out = Vec::new();
        for (i, v) in views.iter().enumerate() {
            for (at, _) in v
                .bytes
                .windows(needle.len())
                .enumerate()
                .filter(|(_, w)| *w == needle.as_bytes())
            {
                let r = to_text(&views, i, at..at + needle.len());
                out.push(text[r].to_owned());
            }
        }
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn escapes_map_back_to_what_was_written() {
        assert_eq!(found("k=a%2Bb%2fc&x", "a+b/c"), ["a%2Bb%2fc"]);
        assert_eq!(found("k=a%20b&x", "a+b"), ["a%20b"]);
        assert_eq!(
            found(r#"{"q":"a\/b\u00e9\"c"}"#, "a/bé\"c"),
            [r#"a\/b\u00e9\"c"#]
        );
        assert_eq!(
            found(r"x \ud83d\udd11key y", "\u{1F511}key"),
            [r"\ud83d\udd11key"]
        );
        assert_eq!(
            found("<p>a&amp;b&#43;c&#x2f;d</p>", "a&b+c/d"),
            ["a&amp;b&#43;c&#x2f;d"]
        );
        // Layered: percent-encoding inside JSON, and JSON quoted in JSON.
        assert_eq!(found(r#"{"u":"https:\/\/x?k=a%2Fb"}"#, "a/b"), [r"a%2Fb"]);
        assert_eq!(
            found(r#"{"m":"{\\\"k\\\":\\\"a\\\\/b\\\"}"}"#, "a/b").len(),
            1
        );
        // Double percent-encoding.
        assert_eq!(found("k=a%252Bb", "a+b"), ["a%252Bb"]);
    }

    #[test]
    fn text_without_escapes_has_no_views() {
        assert!(decoded_views(b"plain text, 100% sure & \\ odd").is_empty());
        assert!(!has_escapes(b"plain text"));
    }
}
