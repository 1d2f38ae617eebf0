//! Filler speech for a slow tool on a GPT-Live call. Commentary is context the voice model
//! speaks (paraphrased) and GPT-Live says nothing when it is done, so the driver keeps an
//! estimate of when the caller stops hearing it — its length at a speaking pace, pushed back
//! while the voice model's own transcript still streams — and says the next filler once the
//! caller has heard nothing for the agent's turn budget, at most [`MAX_FILLERS`] a tool call.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Most fillers said while one function call runs.
pub(super) const MAX_FILLERS: u32 = 8;

/// A speaking pace for estimates: about 150 words a minute.
const CHARS_PER_SECOND: f64 = 14.0;

/// How long the voice model is taken to go on talking after each piece of its transcript.
const TRANSCRIPT_TAIL: Duration = Duration::from_millis(300);

/// What a later filler asks for: new words, no result.
pub(super) const STILL_WORKING: &str = "The caller is still waiting for the result you are \
working on. Say in one short sentence, in words you have not used yet on this call, that you \
are still on it. Give no result and ask nothing.";

/// How long a later filler's paraphrase is taken to last.
const STILL_WORKING_SPOKEN: Duration = Duration::from_millis(1_500);

/// The fillers of a call's running tools and when the caller last stops hearing speech.
#[derive(Debug, Default)]
pub(super) struct Fillers {
    said: HashMap<String, u32>,
    heard_until: Option<Instant>,
}

/// What to do when a function call's filler timer fires.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Due {
    /// Say a later filler now ([`STILL_WORKING`]); check again after the returned wait.
    Say(Duration),
    /// Speech is still heard: check again after the wait.
    Later(Duration),
    /// No more fillers for it.
    Done,
}

impl Fillers {
    /// The tool's first filler (`text`) was said now: returns when to check for the next.
    pub(super) fn first(&mut self, call: &str, text: &str, budget: Duration) -> Duration {
        self.said.insert(call.to_owned(), 1);
        self.speaks(spoken(text));
        self.wait(budget)
    }

    /// Commentary `text` went to the voice model now (a tool's `messages.start`).
    pub(super) fn spoke(&mut self, text: &str) {
        self.speaks(spoken(text));
    }

    /// The voice model said something (a transcript piece): it is heard a little longer.
    pub(super) fn transcript(&mut self) {
        self.speaks(TRANSCRIPT_TAIL);
    }

    /// A later check of `call`'s fillers, once it has had its first.
    pub(super) fn due(&mut self, call: &str, budget: Duration) -> Due {
        let Some(said) = self.said.get_mut(call) else {
            return Due::Done;
        };
        if *said >= MAX_FILLERS {
            return Due::Done;
        }
        let quiet_from = self.heard_until.unwrap_or_else(Instant::now);
        let due_at = quiet_from + budget;
        let now = Instant::now();
        if due_at > now + Duration::from_millis(20) {
            return Due::Later(due_at - now);
        }
        *said += 1;
        self.speaks(STILL_WORKING_SPOKEN);
        Due::Say(self.wait(budget))
    }

    /// `call` was answered (or its filler timer is no longer wanted).
    pub(super) fn done(&mut self, call: &str) {
        self.said.remove(call);
    }

    fn speaks(&mut self, lasting: Duration) {
        let now = Instant::now();
        let from = self.heard_until.filter(|t| *t > now).unwrap_or(now);
        self.heard_until = Some(from + lasting);
    }

    fn wait(&self, budget: Duration) -> Duration {
        let now = Instant::now();
        self.heard_until
            .map_or(budget, |t| t.saturating_duration_since(now) + budget)
    }
}

/// How long `text` takes to say at [`CHARS_PER_SECOND`].
fn spoken(text: &str) -> Duration {
    Duration::from_secs_f64(text.chars().count() as f64 / CHARS_PER_SECOND)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Duration = Duration::from_millis(700);

    #[test]
    fn the_next_filler_waits_for_the_first_to_be_heard_and_the_budget() {
        let mut f = Fillers::default();
        // 28 characters: two seconds of speech, then the budget.
        let wait = f.first("c", "One moment, looking that up.", BUDGET);
        assert!(
            wait >= Duration::from_millis(2600) && wait <= Duration::from_millis(2700),
            "{wait:?}"
        );
        assert!(matches!(f.due("c", BUDGET), Due::Later(_)));
    }

    #[test]
    fn transcript_pushes_the_next_filler_back_and_the_count_is_capped() {
        let mut f = Fillers::default();
        f.first("c", "", BUDGET);
        f.transcript();
        match f.due("c", BUDGET) {
            Due::Later(w) => assert!(w > Duration::from_millis(900), "{w:?}"),
            other => panic!("{other:?}"),
        }
        f.heard_until = Some(Instant::now() - BUDGET);
        for _ in 1..MAX_FILLERS {
            assert!(matches!(f.due("c", BUDGET), Due::Say(_)));
            f.heard_until = Some(Instant::now() - BUDGET);
        }
        assert_eq!(f.due("c", BUDGET), Due::Done);
        f.done("c");
        assert_eq!(f.due("c", BUDGET), Due::Done);
    }
}
