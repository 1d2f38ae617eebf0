//! The model's responses on one Realtime call: the function calls each made, whether it is
//! done, and the moment one is done with all its calls answered, when its `response.create`
//! falls due. A response is forgotten once settled, so a long call keeps only the few that
//! are still open.

use std::collections::{HashMap, VecDeque};

/// Most function calls tracked per response; a response that makes more has them answered,
/// and each of those answers asks for a continuation of its own (as an answer outside any
/// response does).
const MAX_RESPONSE_CALLS: usize = 128;

/// Most responses kept open. The API runs one response at a time, so more are responses whose
/// `response.done` never came (a socket lost mid-response); the oldest is forgotten, and its
/// calls' answers count as outside any response.
const MAX_OPEN_RESPONSES: usize = 64;

#[derive(Debug, Default)]
struct Open {
    /// Tracked calls not answered yet.
    waiting: Vec<String>,
    /// Calls tracked so far, answered or not.
    tracked: usize,
    done: bool,
    cancelled: bool,
}

/// What an answer or a `response.done` settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settled {
    /// The call belongs to no response kept open.
    Untracked,
    /// Its response still waits for more.
    Waiting,
    /// Nothing is owed: the response made no calls.
    Nothing,
    /// Its response is done and all its calls answered: a continuation is due unless the
    /// caller cut the response off.
    Response { cancelled: bool },
}

#[derive(Debug, Default)]
pub(super) struct Responses {
    open: HashMap<String, Open>,
    /// `open`'s ids, oldest first.
    order: VecDeque<String>,
    /// Tracked call → its response.
    call_response: HashMap<String, String>,
}

impl Responses {
    /// A response began (`response.created`).
    pub(super) fn created(&mut self, response: &str) {
        self.open_entry(response);
    }

    /// `response` made function call `call`.
    pub(super) fn add_call(&mut self, response: &str, call: &str) {
        let open = self.open_entry(response);
        if open.tracked < MAX_RESPONSE_CALLS {
            open.tracked += 1;
            open.waiting.push(call.to_owned());
            self.call_response
                .insert(call.to_owned(), response.to_owned());
        }
    }

    /// `call` was answered.
    pub(super) fn answered(&mut self, call: &str) -> Settled {
        let Some(response) = self.call_response.remove(call) else {
            return Settled::Untracked;
        };
        if let Some(open) = self.open.get_mut(&response) {
            open.waiting.retain(|c| c != call);
        }
        self.settle(&response)
    }

    /// `response` ended (`response.done`); a response that made no calls is forgotten at once.
    pub(super) fn done(&mut self, response: &str, cancelled: bool) -> Settled {
        let Some(open) = self.open.get_mut(response) else {
            return Settled::Untracked;
        };
        open.done = true;
        open.cancelled = cancelled;
        if open.tracked == 0 {
            self.forget(response);
            return Settled::Nothing;
        }
        self.settle(response)
    }

    #[cfg(test)]
    pub(super) fn held(&self) -> (usize, usize) {
        (self.open.len(), self.call_response.len())
    }

    fn settle(&mut self, response: &str) -> Settled {
        match self.open.get(response) {
            Some(open) if open.done && open.waiting.is_empty() => {
                let cancelled = open.cancelled;
                self.forget(response);
                Settled::Response { cancelled }
            }
            Some(_) => Settled::Waiting,
            None => Settled::Untracked,
        }
    }

    fn open_entry(&mut self, response: &str) -> &mut Open {
        if !self.open.contains_key(response) {
            if self.order.len() >= MAX_OPEN_RESPONSES
                && let Some(oldest) = self.order.front().cloned()
            {
                self.forget(&oldest);
            }
            self.order.push_back(response.to_owned());
        }
        self.open.entry(response.to_owned()).or_default()
    }

    fn forget(&mut self, response: &str) {
        if let Some(open) = self.open.remove(response) {
            for call in open.waiting {
                self.call_response.remove(&call);
            }
        }
        self.order.retain(|r| r != response);
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_OPEN_RESPONSES, MAX_RESPONSE_CALLS, Responses, Settled};

    #[test]
    fn a_response_settles_once_done_and_answered_in_either_order() {
        let mut r = Responses::default();
        r.created("resp_1");
        r.add_call("resp_1", "call_a");
        r.add_call("resp_1", "call_b");
        assert_eq!(r.answered("call_a"), Settled::Waiting);
        assert_eq!(r.done("resp_1", false), Settled::Waiting, "call_b is out");
        assert_eq!(r.answered("call_b"), Settled::Response { cancelled: false });
        assert_eq!(r.held(), (0, 0), "a settled response is forgotten");

        r.created("resp_2");
        r.add_call("resp_2", "call_c");
        assert_eq!(r.answered("call_c"), Settled::Waiting, "not done yet");
        assert_eq!(
            r.done("resp_2", true),
            Settled::Response { cancelled: true }
        );
        assert_eq!(r.held(), (0, 0));
        // A repeated `response.done` and a repeated answer find nothing to settle again.
        assert_eq!(r.done("resp_2", true), Settled::Untracked);
        assert_eq!(r.answered("call_c"), Settled::Untracked);
    }

    #[test]
    fn a_long_call_keeps_only_what_is_open() {
        let mut r = Responses::default();
        for n in 0..10_000 {
            let (response, call) = (format!("resp_{n}"), format!("call_{n}"));
            r.created(&response);
            r.add_call(&response, &call);
            r.done(&response, false);
            assert_eq!(r.answered(&call), Settled::Response { cancelled: false });
            // The model's spoken reply: a response without calls.
            let said = format!("said_{n}");
            r.created(&said);
            assert_eq!(r.done(&said, false), Settled::Nothing);
        }
        assert_eq!(r.held(), (0, 0));
    }

    #[test]
    fn responses_never_done_are_bounded_and_their_calls_answer_untracked() {
        let mut r = Responses::default();
        r.created("lost");
        r.add_call("lost", "call_lost");
        for n in 0..MAX_OPEN_RESPONSES * 3 {
            r.created(&format!("resp_{n}"));
        }
        assert_eq!(r.held(), (MAX_OPEN_RESPONSES, 0));
        assert_eq!(r.answered("call_lost"), Settled::Untracked);
    }

    #[test]
    fn calls_past_the_bound_of_one_response_answer_untracked() {
        let mut r = Responses::default();
        r.created("busy");
        for n in 0..MAX_RESPONSE_CALLS + 5 {
            r.add_call("busy", &format!("call_{n}"));
        }
        assert_eq!(r.held(), (1, MAX_RESPONSE_CALLS));
        let last = format!("call_{}", MAX_RESPONSE_CALLS + 4);
        assert_eq!(r.answered(&last), Settled::Untracked);
        assert_eq!(r.done("busy", false), Settled::Waiting);
        for n in 0..MAX_RESPONSE_CALLS - 1 {
            assert_eq!(r.answered(&format!("call_{n}")), Settled::Waiting);
        }
        let final_one = format!("call_{}", MAX_RESPONSE_CALLS - 1);
        assert_eq!(
            r.answered(&final_one),
            Settled::Response { cancelled: false }
        );
        assert_eq!(r.held(), (0, 0));
    }
}
