//! Problems found in a tool definition, each with its place (a JSON Pointer) and a fix.
//!
//! The parser never stops at the first problem: it collects every [`Diagnostic`] of a definition
//! in one pass, so a user fixes a broken tool file in one round trip.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One problem in a definition: where it is, what is wrong, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// JSON Pointer (RFC 6901) of the offending value, `""` for the whole document.
    pub pointer: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fix: Option<String>,
}

impl Diagnostic {
    /// A JSON syntax error, with the line and column to fix.
    pub fn json_syntax(e: &serde_json::Error) -> Self {
        Diagnostic {
            pointer: String::new(),
            message: format!("not valid JSON: {e}"),
            fix: Some(format!(
                "fix the JSON syntax at line {}, column {}",
                e.line(),
                e.column()
            )),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "{at}: {}", self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, " (fix: {fix})")?;
        }
        Ok(())
    }
}

/// Every problem found in one definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(f, "{n} problem{}", if n == 1 { "" } else { "s" })?;
        for d in &self.0 {
            write!(f, "\n  {d}")?;
        }
        Ok(())
    }
}

/// Collects diagnostics while a definition is read.
#[derive(Debug, Default)]
pub(crate) struct Sink {
    pub(crate) items: Vec<Diagnostic>,
}

impl Sink {
    pub(crate) fn push(&mut self, pointer: &str, message: impl Into<String>, fix: Option<String>) {
        self.items.push(Diagnostic {
            pointer: pointer.to_owned(),
            message: message.into(),
            fix,
        });
    }

    pub(crate) fn error(&mut self, pointer: &str, message: impl Into<String>) {
        self.push(pointer, message, None);
    }

    pub(crate) fn error_fix(
        &mut self,
        pointer: &str,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.push(pointer, message, Some(fix.into()));
    }
}

/// Appends one reference token to a JSON Pointer, escaping `~` and `/` as RFC 6901 requires.
pub(crate) fn child(pointer: &str, token: impl fmt::Display) -> String {
    let token = token.to_string();
    let mut out = String::with_capacity(pointer.len() + token.len() + 1);
    out.push_str(pointer);
    out.push('/');
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// The closest candidate to `word`, if one is close enough to be a likely typo.
///
/// Close means a few edits away (`mesage` → `message`), or sharing a long prefix
/// (`retries` → `retry_count`).
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let shared_prefix = |c: &str| {
        word.chars()
            .zip(c.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, c)| {
            let few_edits = *d <= (c.len().max(word.len()) / 3).max(1);
            let prefix = shared_prefix(c);
            few_edits || (prefix >= 4 && prefix * 2 >= word.len().min(c.len()))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(child("/data", "a/b~c"), "/data/a~1b~0c");
        assert_eq!(child("", 3), "/3");
    }

    #[test]
    fn suggestions_are_close_matches_only() {
        let known = ["context.set", "context.get", "api_call"];
        assert_eq!(did_you_mean("context.sett", known), Some("context.set"));
        assert_eq!(did_you_mean("apicall", known), Some("api_call"));
        assert_eq!(did_you_mean("banana", known), None);
        assert_eq!(
            did_you_mean("retries", ["retry_count", "response_path"]),
            Some("retry_count")
        );
    }
}
