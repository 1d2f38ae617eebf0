//! Cheap measures of JSON's shape — how deep it nests, about how many bytes it takes — for
//! the limits on what a run accepts and makes.
//!
//! Every walk here is iterative (an explicit stack, never recursion), so input cannot overflow
//! the call stack, and stops as soon as a limit is passed, so a value far over a limit costs no
//! more to measure than the limit itself. Depth counts containers: `1` is 0 deep, `[1]` is 1,
//! `{"a": [1]}` is 2, the same whether read from text or from a parsed value.

use serde_json::Value;

/// Why a value failed a measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    /// It nests deeper than this many levels.
    Depth(usize),
    /// It takes more than this many bytes.
    Size(usize),
}

/// How deep JSON text nests: the deepest `[`/`{` outside strings. The text is not validated;
/// a parser reports its errors afterwards. One pass over the bytes.
pub fn text_depth(text: &[u8]) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// How deep JSON text nests when that is deeper than `max`, else `None`. Text with at most
/// `max` opening brackets in all (strings included) cannot nest deeper, and most text is
/// answered by counting them, which is quicker than following strings and escapes.
pub fn text_deeper_than(text: &[u8], max: usize) -> Option<usize> {
    let opening = text.iter().filter(|&&b| b == b'[' || b == b'{').count();
    if opening <= max {
        return None;
    }
    Some(text_depth(text)).filter(|&depth| depth > max)
}

/// Checks that a value nests at most `max` levels; stops at the first container past it.
pub fn check_depth(v: &Value, max: usize) -> Result<(), Exceeded> {
    let deeper = if max <= crate::limits::JSON_DEPTH_CEILING {
        nests_deeper(v, max)
    } else {
        nests_deeper_walk(v, max)
    };
    if deeper {
        Err(Exceeded::Depth(max))
    } else {
        Ok(())
    }
}

/// Whether `v` holds more than `levels` containers on some path down: recursion at most
/// `levels + 1` calls deep, so only for limits up to the ceiling.
fn nests_deeper(v: &Value, levels: usize) -> bool {
    match v {
        Value::Array(_) | Value::Object(_) if levels == 0 => true,
        Value::Array(a) => a.iter().any(|c| nests_deeper(c, levels - 1)),
        Value::Object(o) => o.values().any(|c| nests_deeper(c, levels - 1)),
        _ => false,
    }
}

/// [`nests_deeper`] for any limit, on a stack of its own.
fn nests_deeper_walk(v: &Value, max: usize) -> bool {
    // Each entry is a node and the number of containers above it.
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((node, above)) = stack.pop() {
        if is_container(node) {
            if above + 1 > max {
                return true;
            }
            push_children(node, above + 1, &mut stack);
        }
    }
    false
}

/// The approximate serialised size of a value (as [`measure`] counts it), or `None` past
/// `max_bytes`. No depth limit: values up to the limits' ceiling deep are summed by recursion,
/// deeper ones on a stack of their own.
pub fn size_within(v: &Value, max_bytes: usize) -> Option<usize> {
    let mut size = 0usize;
    match add_sizes(v, max_bytes, &mut size, 0) {
        Ok(()) => Some(size),
        Err(Stop::Size) => None,
        Err(Stop::Deep) => measure(v, max_bytes, usize::MAX).ok(),
    }
}

/// Why [`add_sizes`] stopped.
enum Stop {
    Size,
    Deep,
}

fn add_sizes(v: &Value, max_bytes: usize, size: &mut usize, depth: usize) -> Result<(), Stop> {
    if depth > crate::limits::JSON_DEPTH_CEILING {
        return Err(Stop::Deep);
    }
    *size = size.saturating_add(node_size(v));
    if *size > max_bytes {
        return Err(Stop::Size);
    }
    match v {
        Value::Array(a) => a
            .iter()
            .try_for_each(|c| add_sizes(c, max_bytes, size, depth + 1)),
        Value::Object(o) => o
            .values()
            .try_for_each(|c| add_sizes(c, max_bytes, size, depth + 1)),
        _ => Ok(()),
    }
}

/// The approximate serialised size of a value (the measure of `context::json_size`), checking
/// on the way that it takes at most `max_bytes` and nests at most `max_depth` levels.
pub fn measure(v: &Value, max_bytes: usize, max_depth: usize) -> Result<usize, Exceeded> {
    if !is_container(v) {
        let size = node_size(v);
        return if size > max_bytes {
            Err(Exceeded::Size(max_bytes))
        } else {
            Ok(size)
        };
    }
    if let Some(flat) = measure_flat(v, max_bytes, max_depth) {
        return flat;
    }
    let mut size = 0usize;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((node, depth)) = stack.pop() {
        size = size.saturating_add(node_size(node));
        if size > max_bytes {
            return Err(Exceeded::Size(max_bytes));
        }
        if is_container(node) {
            if depth + 1 > max_depth {
                return Err(Exceeded::Depth(max_depth));
            }
            push_children(node, depth + 1, &mut stack);
        }
    }
    Ok(size)
}

/// `measure` of a container whose children are all plain values, in the same order of checks,
/// without a stack; `None` for any other container.
fn measure_flat(v: &Value, max_bytes: usize, max_depth: usize) -> Option<Result<usize, Exceeded>> {
    if !is_container(v) || has_container_child(v) {
        return None;
    }
    let mut size = node_size(v);
    if size > max_bytes {
        return Some(Err(Exceeded::Size(max_bytes)));
    }
    if max_depth < 1 {
        return Some(Err(Exceeded::Depth(max_depth)));
    }
    let mut add = |child: &Value| {
        size = size.saturating_add(node_size(child));
        size <= max_bytes
    };
    let fits = match v {
        Value::Array(a) => a.iter().all(&mut add),
        Value::Object(o) => o.values().all(&mut add),
        _ => true,
    };
    Some(if fits {
        Ok(size)
    } else {
        Err(Exceeded::Size(max_bytes))
    })
}

/// Whether a container holds another container.
fn has_container_child(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.iter().any(is_container),
        Value::Object(o) => o.values().any(is_container),
        _ => false,
    }
}

fn is_container(v: &Value) -> bool {
    matches!(v, Value::Array(_) | Value::Object(_))
}

/// The bytes a node adds itself, without its children (as `context::json_size` counts them).
fn node_size(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 2 + a.len(),
        Value::Object(o) => 2 + o.keys().map(|k| k.len() + 4).sum::<usize>(),
    }
}

/// Pushes a container's children, each with the number of containers above it.
fn push_children<'v>(v: &'v Value, depth: usize, stack: &mut Vec<(&'v Value, usize)>) {
    match v {
        Value::Array(a) => stack.extend(a.iter().map(|x| (x, depth))),
        Value::Object(o) => stack.extend(o.values().map(|x| (x, depth))),
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::context::json_size;

    fn nested(depth: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        v
    }

    /// (text, depth) — strings and escapes do not count.
    #[test]
    fn text_depth_counts_containers_outside_strings() {
        let cases: &[(&str, usize)] = &[
            ("1", 0),
            ("\"[[[\"", 0),
            ("[]", 1),
            ("{\"a\": [1, {\"b\": 2}]}", 3),
            ("[\"\\\"[\", [2]]", 2),
            ("[[]] [[[ ]]]", 3),
            ("not json {", 1),
        ];
        for (text, want) in cases {
            assert_eq!(text_depth(text.as_bytes()), *want, "{text}");
        }
    }

    /// The quick answer agrees with the full count for every limit, brackets in strings
    /// included.
    #[test]
    fn text_deeper_than_agrees_with_text_depth() {
        let texts = [
            "1",
            "\"[[[[[[\"",
            "[]",
            "{\"a\": [1, {\"b\": 2}]}",
            "[\"\\\"[\", [2]]",
            "[[]] [[[ ]]]",
            "{\"a\": \"{{{{\", \"b\": [[[]]]}",
        ];
        for text in texts {
            let depth = text_depth(text.as_bytes());
            for max in 0..8 {
                let want = (depth > max).then_some(depth);
                assert_eq!(
                    text_deeper_than(text.as_bytes(), max),
                    want,
                    "{text} max {max}"
                );
            }
        }
    }

    #[test]
    fn value_depth_agrees_with_text_depth() {
        for d in [0, 1, 2, 10, 64, 65, 200] {
            let v = nested(d);
            let text = v.to_string();
            assert_eq!(text_depth(text.as_bytes()), d);
            assert!(check_depth(&v, d).is_ok(), "{d}");
            if d > 0 {
                assert_eq!(check_depth(&v, d - 1), Err(Exceeded::Depth(d - 1)), "{d}");
            }
        }
        let obj = json!({"a": {"b": [1, 2]}, "c": 3});
        assert!(check_depth(&obj, 3).is_ok());
        assert_eq!(check_depth(&obj, 2), Err(Exceeded::Depth(2)));
    }

    #[test]
    fn measure_matches_json_size_and_stops_at_limits() {
        let v = json!({"name": "soup", "items": [1, 2.5, null, true, {"k": "v"}], "n": {}});
        assert_eq!(measure(&v, usize::MAX, 64), Ok(json_size(&v)));
        assert_eq!(measure(&v, 10, 64), Err(Exceeded::Size(10)));
        assert_eq!(measure(&v, usize::MAX, 1), Err(Exceeded::Depth(1)));
        let deep = nested(5000);
        assert_eq!(measure(&deep, usize::MAX, 64), Err(Exceeded::Depth(64)));
        drop_flat(deep);
    }

    /// A container of plain values is measured without a walk, with the walk's answers.
    #[test]
    fn flat_containers_measure_as_the_walk_does() {
        for v in [
            json!([]),
            json!({}),
            json!([1, "ab", null, true, 2.5]),
            json!({"title": "Checkup", "minutes": 30}),
        ] {
            let size = json_size(&v);
            assert_eq!(measure(&v, usize::MAX, 64), Ok(size), "{v}");
            assert_eq!(measure(&v, size, 1), Ok(size), "{v}");
            assert_eq!(
                measure(&v, size - 1, 64),
                Err(Exceeded::Size(size - 1)),
                "{v}"
            );
            assert_eq!(measure(&v, 1, 0), Err(Exceeded::Size(1)), "{v}");
            assert_eq!(measure(&v, size, 0), Err(Exceeded::Depth(0)), "{v}");
            assert_eq!(check_depth(&v, 1), Ok(()), "{v}");
            assert_eq!(check_depth(&v, 0), Err(Exceeded::Depth(0)), "{v}");
        }
    }

    /// Drops a deep value without recursion (serde_json's own drop recurses).
    fn drop_flat(mut v: Value) {
        while let Value::Array(mut a) = v {
            v = a.pop().unwrap_or(Value::Null);
        }
    }

    /// The recursive check and the walk on its own stack answer alike.
    #[test]
    fn both_depth_checks_agree() {
        let values = [
            json!(1),
            json!([]),
            json!({"a": [1, {"b": []}], "c": {}}),
            json!([[], [[[]]], 3]),
            nested(12),
        ];
        for v in &values {
            for max in 0..16 {
                assert_eq!(nests_deeper(v, max), nests_deeper_walk(v, max), "{v} {max}");
            }
        }
    }

    /// The size without a depth limit is `measure`'s, for shallow and deep values alike.
    #[test]
    fn size_within_agrees_with_measure() {
        let values = [
            json!(1),
            json!("text"),
            json!({"a": [1, {"b": []}], "c": {}, "d": "xyz"}),
            json!([[], [[["deep"]]], 3.5, null, true]),
            nested(200),
        ];
        for v in &values {
            let size = json_size(v);
            for max in [0, 1, size / 2, size - 1, size, size + 1, usize::MAX] {
                assert_eq!(
                    size_within(v, max),
                    measure(v, max, usize::MAX).ok(),
                    "{v} {max}"
                );
            }
        }
    }

    #[test]
    fn deep_values_do_not_overflow_the_stack() {
        let v = nested(100_000);
        assert_eq!(
            size_within(&v, usize::MAX),
            measure(&v, usize::MAX, usize::MAX).ok()
        );
        assert_eq!(check_depth(&v, 64), Err(Exceeded::Depth(64)));
        assert!(check_depth(&v, 200_000).is_ok());
        assert!(measure(&v, usize::MAX, usize::MAX).is_ok());
        drop_flat(v);
    }
}
