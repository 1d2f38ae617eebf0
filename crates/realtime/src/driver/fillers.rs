//! Filler speech for a slow tool on a Realtime call: what is said while it runs, and the
//! response that says it, so an answer ready mid-filler can cut it short.

use serde_json::json;

/// Most fillers said while one function call runs (its own `messages.delayed` and the
/// "still working" ones after it); past them the caller waits for the answer.
pub(super) const MAX_FILLERS: u32 = 8;

/// Our filler response: asked for, then being said once `response.created` names it.
#[derive(Debug)]
pub(super) struct Filler {
    /// The function call it covers.
    pub(super) call: String,
    /// Its response, once created.
    pub(super) response: Option<String>,
    /// `response.cancel` was sent for it (once).
    pub(super) cancel_sent: bool,
}

impl Filler {
    pub(super) fn asked(call: String) -> Filler {
        Filler {
            call,
            response: None,
            cancel_sent: false,
        }
    }
}

/// The `n`th (from 1) later filler for a tool still running: the model is asked to say, in
/// words it has not used yet, that it is still on it, so the caller never hears the same
/// sentence twice.
pub(super) fn still_working(n: u32) -> String {
    let instructions = format!(
        "The caller is still waiting for the result you are working on (update {n}). Say in one \
         short sentence, in the conversation's language and in words you have not used yet on \
         this call, that you are still working on it. Do not repeat an earlier sentence, give no \
         result and ask nothing."
    );
    json!({"type": "response.create", "response": {
        "instructions": instructions,
        "tool_choice": "none"}})
    .to_string()
}
