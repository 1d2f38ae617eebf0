//! Bounds on what a call keeps of its invocations, and how an oversized field is cut.
//!
//! The model's answer is never cut: these bounds apply to the *record* kept of an invocation
//! (in the session's memory, in the journal, in a call's view), so a call of many invocations
//! with large arguments holds a bounded amount of memory whatever its input.

use serde_json::json;
use switchboard_core::result::LogEntry;

use crate::invocation::InvocationRecord;

/// How much a call keeps of its invocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLimits {
    /// Records a session holds in memory, and the most a call's view shows: the newest ones.
    /// Beyond it the oldest are dropped from memory (the count goes on): the journal still has
    /// every record, so a repeated old function call id is answered from there, never run
    /// again. Default 1000.
    pub max_records_per_call: usize,
    /// Bytes a record's `arguments` may hold, and its `output`, and its log messages together.
    /// A longer `arguments` or `output` is replaced by the JSON text
    /// `{"truncated": true, "bytes": N, "preview": "…"}` (N: the original length; the whole
    /// marker fits the bound); log messages past the bound are cut. A repeated request answered
    /// from a record gets that record's output. A record's replay trace (the context the tool
    /// saw, its effects' requests and outcomes) is kept only when it fits the bound as a whole.
    /// Default 16 KiB; at least 256.
    pub max_record_field_bytes: usize,
}

impl RecordLimits {
    /// The smallest field bound: room for the marker and a short preview.
    pub const MIN_FIELD_BYTES: usize = 256;

    /// The field bound as applied (never below [`RecordLimits::MIN_FIELD_BYTES`]).
    pub fn field_bytes(&self) -> usize {
        self.max_record_field_bytes.max(Self::MIN_FIELD_BYTES)
    }

    /// The record bound as applied (at least one).
    pub fn records(&self) -> usize {
        self.max_records_per_call.max(1)
    }

    /// The record with its `arguments`, `output` and logs within the field bound.
    pub fn bound(&self, mut record: InvocationRecord) -> InvocationRecord {
        let max = self.field_bytes();
        if record.arguments.len() > max {
            record.arguments = truncated_marker(&record.arguments, max);
        }
        if record.output.len() > max {
            record.output = truncated_marker(&record.output, max);
        }
        bound_logs(&mut record.logs, max);
        if let Some(trace) = &record.trace {
            let bytes = serde_json::to_vec(trace).map_or(usize::MAX, |v| v.len());
            if bytes > max {
                record.trace = None;
                record.trace_bytes = Some(bytes);
            }
        }
        record
    }
}

impl Default for RecordLimits {
    fn default() -> Self {
        RecordLimits {
            max_records_per_call: 1000,
            max_record_field_bytes: 16 * 1024,
        }
    }
}

/// `{"truncated": true, "bytes": N, "preview": "…"}` as JSON text of at most `max` bytes (when
/// `max` leaves room for the marker itself), the preview being the longest start of `text`
/// that fits once escaped.
pub fn truncated_marker(text: &str, max: usize) -> String {
    let mut keep = max.saturating_sub(64).min(text.len());
    loop {
        let cut = floor_char_boundary(text, keep);
        let marker =
            json!({"truncated": true, "bytes": text.len(), "preview": &text[..cut]}).to_string();
        if marker.len() <= max || cut == 0 {
            return marker;
        }
        // Escaping made it longer: keep the share of the preview that fits, and try again.
        let share = cut.saturating_mul(max.saturating_sub(64)) / marker.len();
        keep = share.min(cut - 1);
    }
}

/// Keeps log messages within `max` bytes together: the first ones whole, the one that crosses
/// the bound cut (with a note of how many followed), the rest dropped.
fn bound_logs(logs: &mut Vec<LogEntry>, max: usize) {
    let mut used = 0usize;
    for i in 0..logs.len() {
        let len = logs[i].message.len();
        if used + len <= max {
            used += len;
            continue;
        }
        let dropped = logs.len() - i - 1;
        let entry = &mut logs[i];
        let cut = floor_char_boundary(&entry.message, max - used);
        entry.message.truncate(cut);
        entry.message.push_str(&format!(
            "… (cut at {max} bytes of log messages; {dropped} more entries not kept)"
        ));
        logs.truncate(i + 1);
        return;
    }
}

/// The largest index `<= i` that is a char boundary of `s`.
fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_marker_is_valid_json_within_the_bound_whatever_it_escapes() {
        for text in [
            "a".repeat(100_000),
            "\"".repeat(100_000),
            "\u{1}".repeat(100_000),
            "é€😀".repeat(20_000),
        ] {
            let m = truncated_marker(&text, 1024);
            assert!(m.len() <= 1024, "{} bytes", m.len());
            let v: Value = serde_json::from_str(&m).unwrap();
            assert_eq!(v["truncated"], true);
            assert_eq!(v["bytes"], text.len());
            let preview = v["preview"].as_str().unwrap();
            assert!(!preview.is_empty() && text.starts_with(preview));
        }
    }

    #[test]
    fn logs_are_cut_at_the_bound() {
        let entry = |m: &str| LogEntry {
            level: switchboard_core::result::LogLevel::Info,
            message: m.to_owned(),
            action: "/actions/0".into(),
        };
        let mut logs = vec![entry(&"x".repeat(200)); 10];
        bound_logs(&mut logs, 500);
        assert_eq!(logs.len(), 3);
        assert!(logs[2].message.contains("7 more entries not kept"));
        let mut small = vec![entry("a"), entry("b")];
        bound_logs(&mut small, 500);
        assert_eq!(small, vec![entry("a"), entry("b")]);
    }
}
