//! [`RecentIds`]: the function call ids a call's driver remembers, the newest few only.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// Function call ids a driver remembers per kind (started, answered): enough to drop any
/// repeat the API sends of a call's events or the session of an answer, which come within a
/// response or two. The model may go on calling tools as long as the call lasts, so the
/// oldest are forgotten; a repeat of a forgotten call still runs nothing and gets no second
/// answer (the session ignores an id its records or the journal hold).
pub(crate) const REMEMBERED_CALLS: usize = 1024;

/// A set of ids that forgets its oldest once it holds `max`.
#[derive(Debug)]
pub(crate) struct RecentIds {
    ids: HashSet<Arc<str>>,
    order: VecDeque<Arc<str>>,
    max: usize,
}

impl Default for RecentIds {
    fn default() -> Self {
        RecentIds::new(REMEMBERED_CALLS)
    }
}

impl RecentIds {
    pub(crate) fn new(max: usize) -> Self {
        RecentIds {
            ids: HashSet::new(),
            order: VecDeque::new(),
            max: max.max(1),
        }
    }

    /// Adds `id`; `false` if it was there already.
    pub(crate) fn insert(&mut self, id: &str) -> bool {
        if self.ids.contains(id) {
            return false;
        }
        if self.order.len() == self.max
            && let Some(oldest) = self.order.pop_front()
        {
            self.ids.remove(&oldest);
        }
        let id: Arc<str> = Arc::from(id);
        self.order.push_back(Arc::clone(&id));
        self.ids.insert(id);
        true
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::RecentIds;

    #[test]
    fn a_repeat_is_refused_and_the_oldest_goes_first() {
        let mut ids = RecentIds::new(3);
        assert!(ids.insert("a"));
        assert!(!ids.insert("a"), "a repeat is not new");
        assert!(ids.insert("b"));
        assert!(ids.insert("c"));
        assert!(ids.insert("d"), "a fourth pushes the oldest out");
        assert_eq!(ids.len(), 3);
        assert!(!ids.contains("a"));
        assert!(ids.contains("b") && ids.contains("c") && ids.contains("d"));
        // A repeat does not refresh an id's place: "b" is still the oldest.
        assert!(!ids.insert("b"));
        assert!(ids.insert("e"));
        assert!(!ids.contains("b"));
        assert!(ids.contains("c"));
    }

    #[test]
    fn ten_thousand_ids_keep_only_the_bound() {
        let mut ids = RecentIds::default();
        for n in 0..10_000 {
            assert!(ids.insert(&format!("call_{n}")));
        }
        assert_eq!(ids.len(), super::REMEMBERED_CALLS);
        assert!(ids.contains("call_9999"));
        assert!(!ids.contains("call_0"));
    }
}
