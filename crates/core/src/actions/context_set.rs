//! `context.set`: write each value (rendered, typed) to its path.

use super::{Exec, Flow, ParseCx};
use crate::context::WritePath;
use crate::diag::child;
use crate::reader::Obj;
use crate::template::ValueTemplate;

pub(crate) const FIELDS: &[&str] = &["type", "data"];

#[derive(Debug)]
pub(crate) struct ContextSet {
    data: Vec<(WritePath, ValueTemplate)>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<ContextSet> {
    let data = obj.object("data", cx.sink).or_else(|| {
        if obj.get("data").is_none() {
            cx.sink.error_fix(
                &obj.ptr,
                "`context.set` has no `data`",
                "add `\"data\": {\"workflow.key\": \"value\"}`",
            );
        }
        None
    })?;
    let ptr = obj.at("data");
    let mut out = Vec::with_capacity(data.len());
    for (path, value) in data {
        let at = child(&ptr, path);
        let wp = cx.write_path(path, &at);
        let vt = cx.value_template(value, &at);
        out.extend(wp.map(|p| (p, vt)));
    }
    Some(ContextSet { data: out })
}

impl ContextSet {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        for (path, t) in &self.data {
            // A later key may read what an earlier key of this action wrote.
            x.sync();
            let value = match x.eval(t) {
                Ok(v) => v,
                Err(e) => return Flow::Fail(e),
            };
            if let Err(e) = x.write(path, value) {
                return Flow::Fail(e);
            }
        }
        Flow::Next
    }
}
