//! The error codes a model receives, and the error a tool run ends with.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a function call did not succeed; the `error` field of a failed result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    ToolNotFound,
    ToolDisabled,
    ToolArgsParseError,
    InvalidArguments,
    ValidationFailed,
    ApiCallFailed,
    UpstreamUnavailable,
    Timeout,
    Cancelled,
    CallTransferFailed,
    HandoffFailed,
    RateLimited,
    ToolExecutionFailed,
    /// A runaway guard refused the call: the same call repeated too often, or too many calls.
    LoopDetected,
    /// This terminal tool (a transfer, a hang-up) already ran in this call.
    AlreadyDone,
    /// The calendar slot asked for is held by another booking or taken in the calendar; the
    /// `details` list free `alternatives`.
    SlotTaken,
    /// The time asked for is outside the calendar's opening hours.
    OutsideHours,
    /// The calendar could not be reached or failed; trying again later may work.
    CalendarUnavailable,
    /// The calendar's connection is missing, revoked or refused: the operator must reconnect.
    NotConnected,
    /// An attendee's address is not an email address.
    InvalidAttendee,
    /// The booking or event named is not there (or is not the caller's).
    NotFound,
    /// The booking starts too soon to be cancelled or moved (the calendar's
    /// `cancel_notice_minutes`).
    TooLateToChange,
}

impl ErrorCode {
    /// Every code, for documentation and metrics labels.
    pub const ALL: [ErrorCode; 22] = [
        ErrorCode::ToolNotFound,
        ErrorCode::ToolDisabled,
        ErrorCode::ToolArgsParseError,
        ErrorCode::InvalidArguments,
        ErrorCode::ValidationFailed,
        ErrorCode::ApiCallFailed,
        ErrorCode::UpstreamUnavailable,
        ErrorCode::Timeout,
        ErrorCode::Cancelled,
        ErrorCode::CallTransferFailed,
        ErrorCode::HandoffFailed,
        ErrorCode::RateLimited,
        ErrorCode::ToolExecutionFailed,
        ErrorCode::LoopDetected,
        ErrorCode::AlreadyDone,
        ErrorCode::SlotTaken,
        ErrorCode::OutsideHours,
        ErrorCode::CalendarUnavailable,
        ErrorCode::NotConnected,
        ErrorCode::InvalidAttendee,
        ErrorCode::NotFound,
        ErrorCode::TooLateToChange,
    ];

    /// The code as the model sees it, e.g. `invalid_arguments`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ToolNotFound => "tool_not_found",
            ErrorCode::ToolDisabled => "tool_disabled",
            ErrorCode::ToolArgsParseError => "tool_args_parse_error",
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::ValidationFailed => "validation_failed",
            ErrorCode::ApiCallFailed => "api_call_failed",
            ErrorCode::UpstreamUnavailable => "upstream_unavailable",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::CallTransferFailed => "call_transfer_failed",
            ErrorCode::HandoffFailed => "handoff_failed",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::ToolExecutionFailed => "tool_execution_failed",
            ErrorCode::LoopDetected => "loop_detected",
            ErrorCode::AlreadyDone => "already_done",
            ErrorCode::SlotTaken => "slot_taken",
            ErrorCode::OutsideHours => "outside_hours",
            ErrorCode::CalendarUnavailable => "calendar_unavailable",
            ErrorCode::NotConnected => "not_connected",
            ErrorCode::InvalidAttendee => "invalid_attendee",
            ErrorCode::NotFound => "not_found",
            ErrorCode::TooLateToChange => "too_late_to_change",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure the model is told about: its code, a sentence it can act on, and optional details.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ToolError {
    /// An error with a code and a message for the model.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// Adds structured details (e.g. one entry per invalid argument).
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}
