//! `context.get`: copy values into `result` (for the model) or another path.
//!
//! A missing path gives `null`. With several paths, `into` receives an object keyed by each
//! path's last segment; without `into`, each value goes to `result.<last segment>`.

use serde_json::{Map, Value};

use super::{Exec, Flow, ParseCx};
use crate::context::{ReadPath, Target, WritePath};
use crate::reader::Obj;

pub(crate) const FIELDS: &[&str] = &["type", "paths", "into"];

#[derive(Debug)]
pub(crate) struct ContextGet {
    paths: Vec<ReadPath>,
    into: Option<WritePath>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<ContextGet> {
    obj.req("paths", cx.sink)?;
    let mut paths = Vec::new();
    for (src, at) in obj.strings("paths", cx.sink)? {
        match ReadPath::parse(src) {
            Some(p) => {
                cx.mark_read(&p.root);
                paths.push(p);
            }
            None => cx.sink.error_fix(
                &at,
                format!("`{src}` is not a valid path"),
                "write dot-separated names such as `workflow.order.id`",
            ),
        }
    }
    if paths.is_empty() {
        cx.sink.error_fix(
            &obj.at("paths"),
            "`paths` is empty",
            "list at least one path to read",
        );
    }
    let into = match obj.str("into", cx.sink) {
        Some(src) => Some(cx.write_path(src, &obj.at("into"))?),
        None => None,
    };
    Some(ContextGet { paths, into })
}

impl ContextGet {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        let values: Vec<(String, Value)> = self
            .paths
            .iter()
            .map(|p| (p.last().to_owned(), x.read(p)))
            .collect();
        let writes: Vec<(WritePath, Value)> = match (&self.into, values.len()) {
            (Some(into), 1) => values.into_iter().map(|(_, v)| (into.clone(), v)).collect(),
            (Some(into), _) => vec![(
                into.clone(),
                Value::Object(values.into_iter().collect::<Map<_, _>>()),
            )],
            (None, _) => values
                .into_iter()
                .map(|(k, v)| {
                    (
                        WritePath {
                            target: Target::Result,
                            keys: vec![k].into(),
                            append: false,
                        },
                        v,
                    )
                })
                .collect(),
        };
        for (path, value) in writes {
            if let Err(e) = x.write(&path, value) {
                return Flow::Fail(e);
            }
        }
        Flow::Next
    }
}
