//! The typed failures of the calendar toolkits: each is an answer's `error` code with a
//! sentence the model can say, so a voice agent can tell "that time is gone, how about 3 pm"
//! from "the calendar is down, we will call you back" without reading prose.

use serde_json::{Value, json};
use switchboard_core::{ErrorCode, ToolError};

/// The model's arguments cannot be used (a time that is not RFC 3339, an empty range).
pub(crate) fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InvalidArguments, message)
}

/// The slot is held by another booking or taken in the calendar; `alternatives` are free slots
/// (`{start, end}`) to offer instead.
pub(crate) fn slot_taken(message: impl Into<String>, alternatives: Vec<Value>) -> ToolError {
    ToolError::new(ErrorCode::SlotTaken, message)
        .with_details(json!({"alternatives": alternatives}))
}

/// The time asked is outside the calendar's hours; `alternatives` as for [`slot_taken`].
pub(crate) fn outside_hours(message: impl Into<String>, alternatives: Vec<Value>) -> ToolError {
    ToolError::new(ErrorCode::OutsideHours, message)
        .with_details(json!({"alternatives": alternatives}))
}

/// The calendar could not be reached or failed: retryable.
pub(crate) fn unavailable(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::CalendarUnavailable, message)
}

/// The calendar's connection or credentials are missing or refused: the operator must act.
pub(crate) fn not_connected(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::NotConnected, message)
}

/// The provider asks for fewer requests (Google's `rateLimitExceeded`, 429).
pub(crate) fn rate_limited(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::RateLimited, message)
}

/// The calendar did not answer in time.
pub(crate) fn timeout(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::Timeout, message)
}

/// An attendee address is not an email address.
pub(crate) fn invalid_attendee(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InvalidAttendee, message)
}

/// The booking named is not there, or is not the caller's.
pub(crate) fn not_found(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::NotFound, message)
}

/// The booking starts too soon to be cancelled or moved (`cancel_notice_minutes`).
pub(crate) fn too_late_to_change(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::TooLateToChange, message)
}

/// The agent's calendar settings are wrong (a bad URL or zone): the operator must fix them.
pub(crate) fn misconfigured(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::NotConnected, message)
}
