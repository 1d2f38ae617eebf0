//! Reading one field of a JSON object.
//!
//! The objects a run reads from are small: a tool's parameters, a booking, the call's facts.
//! For those, comparing the few keys in order is cheaper than hashing the one looked for (the
//! map's hasher is SipHash, built to resist collisions, not to be quick on short keys); larger
//! objects are looked up through the map's index as usual.

use serde_json::{Map, Value};

/// Objects with at most this many fields are scanned rather than hashed.
const SCAN_UP_TO: usize = 12;

/// The value of `key` in `m`.
pub fn get<'v>(m: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    if m.len() <= SCAN_UP_TO {
        m.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        m.get(key)
    }
}

/// The value of `key` in `v`, when `v` is an object that has it.
pub fn of<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => get(m, key),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Small and large objects answer alike: present keys, absent keys, keys that are
    /// prefixes of others, and the last of many.
    #[test]
    fn small_and_large_objects_answer_as_the_map_does() {
        for n in [0, 1, 2, SCAN_UP_TO, SCAN_UP_TO + 1, 40] {
            let mut m = Map::new();
            for i in 0..n {
                m.insert(format!("k{i}"), json!(i));
            }
            for key in ["k0", "k1", "k", "k10", "k39", "missing", ""] {
                assert_eq!(get(&m, key), m.get(key), "{n} fields, key {key:?}");
            }
            let v = Value::Object(m.clone());
            assert_eq!(of(&v, "k0"), m.get("k0"));
        }
        assert_eq!(of(&json!([1, 2]), "0"), None);
        assert_eq!(of(&json!("k0"), "k0"), None);
    }
}
