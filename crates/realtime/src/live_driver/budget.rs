//! The backend's input budget on one GPT-Live call: outputs of a turn cut to share a byte
//! budget, and an output OpenAI refused as too big (`response_input_buffer_full`) found by
//! its event id so it can be sent again as a marker only, once.

use std::collections::VecDeque;

use crate::live_events;
use crate::recent::RecentIds;

/// The marker ending an output cut to fit the backend's input budget.
pub const CUT_MARKER: &str =
    "\n[Switchboard: the rest of this result was cut; it was longer than the model can take in]";

/// How many sent outputs are remembered for an error to name.
const MAX_SENT: usize = 256;

/// `output` cut to the room a turn that has used `used` of `budget` bytes has left (never less
/// than the marker itself).
pub(super) fn fit(output: &str, budget: usize, used: usize) -> String {
    let room = budget.saturating_sub(used).max(CUT_MARKER.len());
    live_events::cut(output, room, CUT_MARKER)
}

/// The latest outputs sent, to resend one OpenAI refused.
#[derive(Debug, Default)]
pub(super) struct Refusals {
    /// (`event_id`, function call) of the latest outputs; at most [`MAX_SENT`].
    sent: VecDeque<(String, String)>,
    /// Calls whose output was refused once already and sent again as a marker only (the
    /// newest; a refusal names an output of [`MAX_SENT`], so older ones never come back).
    shrunk: RecentIds,
    /// Whether any output was refused on this call.
    refused: bool,
}

impl Refusals {
    /// The output of `call` went as event `event_id`.
    pub(super) fn remember(&mut self, event_id: String, call: String) {
        if self.sent.len() >= MAX_SENT {
            self.sent.pop_front();
        }
        self.sent.push_back((event_id, call));
    }

    /// The call whose output went as `event_id`, if it is remembered and was not refused
    /// before (a second refusal is not answered again).
    pub(super) fn first_refusal(&mut self, event_id: Option<&str>) -> Option<String> {
        let id = event_id?;
        let call = self
            .sent
            .iter()
            .find(|(e, _)| e == id)
            .map(|(_, call)| call.clone())?;
        self.refused = true;
        self.shrunk.insert(&call).then_some(call)
    }

    /// Whether an output has been refused on this call.
    pub(super) fn any(&self) -> bool {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::Refusals;

    #[test]
    fn an_output_is_resent_once_and_only_a_known_one() {
        let mut r = Refusals::default();
        r.remember("sb_1".into(), "call_a".into());
        assert_eq!(r.first_refusal(Some("sb_9")), None, "not an output we sent");
        assert_eq!(r.first_refusal(None), None);
        assert!(!r.any());
        assert_eq!(r.first_refusal(Some("sb_1")), Some("call_a".into()));
        assert!(r.any());
        r.remember("sb_2".into(), "call_a".into());
        assert_eq!(
            r.first_refusal(Some("sb_2")),
            None,
            "refused twice: not again"
        );
    }
}
