//! One automaton over every form of a call's secrets, and the redaction of one text with it.
//!
//! A text is searched once as it is; only when it holds an escape marker (`\`, `%`, `&`) are
//! its decoded views made and searched too. Every match, in any view, becomes a range of the
//! text; overlapping ranges are joined and each is replaced by [`REDACTED`](super::REDACTED).

use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::forms::{Kind, Needle, needles};
use super::views::{decoded_views, has_escapes, to_text};

/// The automaton and what each of its patterns is.
#[derive(Clone)]
pub(super) struct Matcher {
    /// `None` when the automaton could not be built (a pattern set beyond the crate's limits):
    /// then every text is taken to hold a secret, so nothing leaks.
    automaton: Option<AhoCorasick>,
    kinds: Vec<Kind>,
    /// Whether some secret could be written as a JSON number (digits only, say a PIN).
    pub numeric: bool,
}

impl Matcher {
    /// The matcher of `secrets` (each at least the minimum length, longest first).
    pub fn new(secrets: &[String]) -> Self {
        let mut all: Vec<Needle> = Vec::new();
        for s in secrets {
            needles(s, &mut all);
        }
        // One pattern per text; a text that is both a form of one secret and the base64 core
        // of another is redacted as the latter (the larger range).
        all.sort_by(|a, b| a.text.cmp(&b.text).then(b.kind_rank().cmp(&a.kind_rank())));
        all.dedup_by(|a, b| a.text == b.text);
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            // A DFA searches a little faster but took 100 µs to build for three secrets; the
            // redactor is built for every call and every call view.
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(all.iter().map(|n| &n.text))
            .ok();
        let numeric = secrets.iter().any(|s| {
            s.bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
        });
        Matcher {
            automaton,
            kinds: all.into_iter().map(|n| n.kind).collect(),
            numeric,
        }
    }

    /// Whether `text` holds a secret in any form.
    pub fn matches(&self, text: &str) -> bool {
        let Some(ac) = &self.automaton else {
            return true;
        };
        let bytes = text.as_bytes();
        ac.is_match(bytes)
            || has_escapes(bytes) && decoded_views(bytes).iter().any(|v| ac.is_match(&v.bytes))
    }

    /// `text` with every secret replaced, or `None` when it holds none.
    pub fn redact(&self, text: &str) -> Option<String> {
        let Some(ac) = &self.automaton else {
            return Some(super::REDACTED.to_owned());
        };
        let bytes = text.as_bytes();
        let mut ranges: Vec<Range<usize>> = Vec::new();
        self.find(ac, bytes, &mut |r| ranges.push(r));
        if has_escapes(bytes) {
            let views = decoded_views(bytes);
            for (i, view) in views.iter().enumerate() {
                self.find(ac, &view.bytes, &mut |r| ranges.push(to_text(&views, i, r)));
            }
        }
        if ranges.is_empty() {
            return None;
        }
        Some(replace(text, ranges))
    }

    /// Every match in `bytes`, overlapping ones too (so a secret overlapping another is not
    /// left half shown), a base64 match widened to its run.
    fn find(&self, ac: &AhoCorasick, bytes: &[u8], found: &mut dyn FnMut(Range<usize>)) {
        for m in ac.find_overlapping_iter(bytes) {
            let range = match self.kinds.get(m.pattern().as_usize()) {
                Some(Kind::Base64) => base64_run(bytes, m.range()),
                _ => m.range(),
            };
            found(range);
        }
    }
}

impl Needle {
    fn kind_rank(&self) -> u8 {
        match self.kind {
            Kind::Plain => 0,
            Kind::Base64 => 1,
        }
    }
}

impl std::fmt::Debug for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the patterns: they are the secrets.
        f.debug_struct("Matcher")
            .field("patterns", &self.kinds.len())
            .finish()
    }
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
}

/// The base64 text around `range`: its characters either side, and its padding.
fn base64_run(bytes: &[u8], range: Range<usize>) -> Range<usize> {
    let mut start = range.start;
    while start > 0 && bytes.get(start - 1).is_some_and(|&b| is_base64(b)) {
        start -= 1;
    }
    let mut end = range.end;
    while bytes.get(end).is_some_and(|&b| is_base64(b)) {
        end += 1;
    }
    while bytes.get(end) == Some(&b'=') {
        end += 1;
    }
    start..end
}

/// `text` with each of `ranges` (joined where they overlap or touch) replaced by the marker.
fn replace(text: &str, mut ranges: Vec<Range<usize>>) -> String {
    ranges.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<u8> = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut i = 0;
    while i < ranges.len() {
        let start = ranges[i].start.max(at);
        let mut end = ranges[i].end;
        i += 1;
        while i < ranges.len() && ranges[i].start <= end {
            end = end.max(ranges[i].end);
            i += 1;
        }
        if end <= start {
            continue;
        }
        out.extend_from_slice(bytes.get(at..start).unwrap_or_default());
        out.extend_from_slice(super::REDACTED.as_bytes());
        at = end.min(bytes.len());
    }
    out.extend_from_slice(bytes.get(at..).unwrap_or_default());
    // Ranges start and end on characters (an escape's first byte, or a whole character of a
    // pattern), so the result is UTF-8; if it ever were not, nothing of the text is kept.
    String::from_utf8(out).unwrap_or_else(|_| super::REDACTED.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_and_touching_ranges_are_one_marker() {
        assert_eq!(replace("abcdefgh", vec![2..4, 3..6, 6..7]), "ab[redacted]h");
        assert_eq!(
            replace("abcdefgh", vec![0..2, 5..8]),
            "[redacted]cde[redacted]"
        );
    }

    #[test]
    fn a_base64_match_takes_its_whole_run() {
        let text = b"Authorization: Basic dXNlcjpzZWNyZXQ= next";
        let core = 27..33;
        assert_eq!(&text[base64_run(text, core)], b"dXNlcjpzZWNyZXQ=");
    }
}
