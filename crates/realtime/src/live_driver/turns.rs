//! The backend's turns on one GPT-Live call: which function calls each turn made, whether it
//! has ended, and when every ended turn is answered so one `response.create` may continue the
//! backend.

use std::collections::HashMap;

/// Most function calls tracked per backend turn (a backend that sends more is answered, but
/// they count to one turn).
const MAX_TURN_CALLS: usize = 128;

/// The turn that gathers a taken-over call's restored runs.
const RESUMED_TURN: &str = "resumed";

/// One backend turn: the calls it made (each with whether it is answered), whether it has
/// ended, and its output bytes so far.
#[derive(Debug, Default)]
struct Turn {
    calls: Vec<(String, bool)>,
    ended: bool,
    bytes: usize,
}

/// Open turns by delegation id (`""` when the backend event names none); a delegation's later
/// turn, begun while an earlier one still waits, carries `+` suffixes.
#[derive(Debug, Default)]
pub(super) struct Turns {
    turns: HashMap<String, Turn>,
    /// Function call → its turn's key.
    call_turn: HashMap<String, String>,
}

impl Turns {
    /// Adds `call` to the open turn of delegation `key`; returns the delegation it belongs to
    /// (`None` when the backend named none). A call after its turn ended belongs to the
    /// backend's next turn.
    pub(super) fn add_call(&mut self, key: String, call: &str) -> Option<String> {
        let mut key = key;
        while self
            .turns
            .get(&key)
            .is_some_and(|t| t.ended && !t.calls.is_empty())
        {
            key.push('+');
        }
        let turn = self.turns.entry(key.clone()).or_default();
        if turn.ended {
            *turn = Turn::default();
        }
        if turn.calls.len() < MAX_TURN_CALLS {
            turn.calls.push((call.to_owned(), false));
            self.call_turn.insert(call.to_owned(), key.clone());
        }
        Some(key.trim_end_matches('+').to_owned()).filter(|k| !k.is_empty())
    }

    /// A restored run of a call the old owner saw: the backend's turn ended there, so it
    /// waits on this call's output and one continuation.
    pub(super) fn adopt(&mut self, call: &str) {
        let turn = self.turns.entry(RESUMED_TURN.to_owned()).or_default();
        turn.ended = true;
        turn.calls.push((call.to_owned(), false));
        self.call_turn
            .insert(call.to_owned(), RESUMED_TURN.to_owned());
    }

    /// Delegation `key`'s open turn has ended (its nested `response.completed`, or an
    /// unfinished end). A turn without calls (the backend's final words) needs nothing.
    pub(super) fn end(&mut self, key: &str) {
        let mut open = key.to_owned();
        while self.turns.get(&open).is_some_and(|t| t.ended) {
            open.push('+');
        }
        match self.turns.get_mut(&open) {
            Some(turn) if !turn.calls.is_empty() => turn.ended = true,
            _ => {
                self.turns.remove(&open);
            }
        }
    }

    /// Whether `call` still counts to a turn waiting for its continuation.
    pub(super) fn waits_on(&self, call: &str) -> bool {
        self.call_turn.contains_key(call)
    }

    /// `call`'s output went out.
    pub(super) fn answered(&mut self, call: &str) {
        if let Some(t) = self.call_turn.get(call).and_then(|k| self.turns.get_mut(k))
            && let Some((_, answered)) = t.calls.iter_mut().find(|(c, _)| c == call)
        {
            *answered = true;
        }
    }

    /// Output bytes sent so far for the turn of `call`.
    pub(super) fn bytes_of(&self, call: &str) -> usize {
        self.turn_of(call).map_or(0, |t| t.bytes)
    }

    /// Counts `bytes` more output to the turn of `call`.
    pub(super) fn add_bytes(&mut self, call: &str, bytes: usize) {
        if let Some(t) = self.call_turn.get(call).and_then(|k| self.turns.get_mut(k)) {
            t.bytes += bytes;
        }
    }

    fn turn_of(&self, call: &str) -> Option<&Turn> {
        self.call_turn.get(call).and_then(|k| self.turns.get(k))
    }

    /// `true` when every ended turn with calls has all its outputs and there is at least one:
    /// those turns are forgotten, and one `response.create` is due for them all.
    pub(super) fn settle(&mut self) -> bool {
        let waiting: Vec<String> = self
            .turns
            .iter()
            .filter(|(_, t)| t.ended && !t.calls.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        if waiting.is_empty() {
            return false;
        }
        let all_answered = self
            .turns
            .values()
            .filter(|t| t.ended)
            .all(|t| t.calls.iter().all(|(_, answered)| *answered));
        if !all_answered {
            return false;
        }
        for k in waiting {
            if let Some(t) = self.turns.remove(&k) {
                for (c, _) in t.calls {
                    self.call_turn.remove(&c);
                }
            }
        }
        self.turns.retain(|_, t| !t.ended);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::Turns;

    #[test]
    fn a_turn_settles_once_ended_and_each_call_answered() {
        let mut turns = Turns::default();
        assert_eq!(turns.add_call("d1".into(), "call_a"), Some("d1".into()));
        turns.add_call("d1".into(), "call_b");
        turns.answered("call_a");
        assert!(!turns.settle(), "the turn has not ended");
        turns.end("d1");
        assert!(!turns.settle(), "call_b is not answered");
        turns.answered("call_b");
        assert!(turns.settle());
        assert!(!turns.waits_on("call_a") && !turns.waits_on("call_b"));
        assert!(!turns.settle(), "a settled turn is forgotten");
    }

    #[test]
    fn answers_of_other_calls_do_not_settle_a_turn() {
        let mut turns = Turns::default();
        turns.add_call(String::new(), "call_a");
        turns.end("");
        // Thousands of answers to calls of no turn (a backend's calls past the bound, or
        // answered after their turn settled) leave the waiting call waiting.
        for n in 0..5_000 {
            turns.answered(&format!("other_{n}"));
        }
        assert!(!turns.settle());
        assert!(turns.waits_on("call_a"));
        turns.answered("call_a");
        assert!(turns.settle());
    }
}
