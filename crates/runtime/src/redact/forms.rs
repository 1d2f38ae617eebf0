//! The forms a secret can take on its way through an upstream and back: what the matcher looks
//! for, computed once per call.
//!
//! Escapes that a decoder can undo (JSON's `\"`/`\/`/`\uXXXX`, percent-encoding in either hex
//! case, HTML's entities) are found by decoding the text ([`super::views`]), so any mix of
//! escaped and plain characters is covered without listing forms here. What cannot be decoded
//! in place is listed: base64 (standard and URL-safe alphabets, padded or not) of the secret and
//! of the encodings a request carries it in — form-urlencoded (`+` for a space, as `api_call`'s
//! `query` sends it), percent-encoded with `%20` (RFC 3986's unreserved characters left), the URL
//! query as a URL template leaves it, and JSON-escaped. (Base64 of another percent-encoding —
//! lower-case hex, another set of characters escaped — is not looked for.) A secret inside a longer base64 text (`user:secret` in a Basic credential, a
//! whole query string encoded) sits at one of three alignments; for each, only the characters
//! that depend on the secret alone are looked for, and a match redacts the whole base64 run
//! around it.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};

/// How a match of a pattern is redacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// The matched bytes.
    Plain,
    /// The whole base64 run holding the match (the match is only its secret-determined core).
    Base64,
}

/// One pattern of the matcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Needle {
    pub text: Vec<u8>,
    pub kind: Kind,
}

/// Base64 text shorter than this is not looked for: a shorter core could occur by chance.
/// (A 6-byte secret, the shortest redacted, has cores of 7 and 8 characters.)
const MIN_BASE64_CORE: usize = 6;

/// What encodeURIComponent and RFC 3986 leave alone: letters, digits, `-._~`.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// What a URL's query keeps encoded when a secret is written straight into a URL template
/// (the WHATWG URL standard's query set, which the `url` crate applies).
const QUERY: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'\'');

/// Every pattern for `secret`.
pub(super) fn needles(secret: &str, out: &mut Vec<Needle>) {
    let plain = |text: &str, out: &mut Vec<Needle>| {
        out.push(Needle {
            text: text.as_bytes().to_vec(),
            kind: Kind::Plain,
        });
    };
    plain(secret, out);
    // The percent-decoded view writes every space as `+` (a form's space), so a secret with a
    // space is looked for that way too.
    if secret.contains(' ') {
        plain(&secret.replace(' ', "+"), out);
    }
    let mut bases: Vec<String> = vec![secret.to_owned()];
    let form: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    bases.push(form);
    bases.push(utf8_percent_encode(secret, COMPONENT).to_string());
    bases.push(utf8_percent_encode(secret, QUERY).to_string());
    if let Ok(quoted) = serde_json::to_string(secret)
        && let Some(inner) = quoted.get(1..quoted.len().saturating_sub(1))
    {
        bases.push(inner.to_owned());
    }
    bases.sort();
    bases.dedup();
    for base in &bases {
        for align in 0..3 {
            for core in base64_cores(base.as_bytes(), align) {
                if core.len() >= MIN_BASE64_CORE {
                    out.push(Needle {
                        text: core.into_bytes(),
                        kind: Kind::Base64,
                    });
                }
            }
        }
    }
}

/// The characters of `bytes`' base64 that depend on `bytes` alone when `align` unknown bytes
/// come before them (and any after), in both alphabets (one when they agree).
fn base64_cores(bytes: &[u8], align: usize) -> Vec<String> {
    let mut padded = vec![0u8; align];
    padded.extend_from_slice(bytes);
    // Character j holds bits 6j..6j+6 of the stream; the secret holds bits 8·align..8·(align+n).
    let first = (8 * align).div_ceil(6);
    let end = 8 * (align + bytes.len()) / 6;
    let mut out = Vec::with_capacity(2);
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        let encoded = engine.encode(&padded);
        if let Some(core) = encoded.get(first..end)
            && !out.iter().any(|c: &String| c == core)
        {
            out.push(core.to_owned());
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cores_are_found_in_base64_of_longer_texts_at_every_alignment() {
        let secret = b"p+ss/w=rd!";
        for align in 0..3 {
            let cores = base64_cores(secret, align);
            for prefix_len in [align, align + 3, align + 6] {
                let mut text = b"user:xy".repeat(3)[..prefix_len].to_vec();
                text.extend_from_slice(secret);
                text.extend_from_slice(b"@tail");
                for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                    let encoded = engine.encode(&text);
                    assert!(
                        cores.iter().any(|c| encoded.contains(c.as_str())),
                        "align {align}, prefix {prefix_len}: {cores:?} in {encoded}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_encodings_a_request_uses_are_bases() {
        let mut out = Vec::new();
        needles("a b+c/d=e@f#g!", &mut out);
        let texts: Vec<String> = out
            .iter()
            .map(|n| String::from_utf8(n.text.clone()).unwrap())
            .collect();
        assert!(texts.contains(&"a b+c/d=e@f#g!".to_owned()));
        assert!(texts.contains(&"a+b+c/d=e@f#g!".to_owned()));
        let form = STANDARD_NO_PAD.encode("a+b%2Bc%2Fd%3De%40f%23g%21");
        assert!(
            texts.iter().any(|t| form.starts_with(t.as_str())),
            "{texts:?}"
        );
        let component = STANDARD_NO_PAD.encode("a%20b%2Bc%2Fd%3De%40f%23g%21");
        assert!(texts.iter().any(|t| component.starts_with(t.as_str())));
    }
}
