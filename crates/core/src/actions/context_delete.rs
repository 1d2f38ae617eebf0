//! `context.delete`: remove values; missing paths are fine.

use super::{Exec, Flow, ParseCx};
use crate::context::WritePath;
use crate::reader::Obj;

pub(crate) const FIELDS: &[&str] = &["type", "paths"];

#[derive(Debug)]
pub(crate) struct ContextDelete {
    paths: Vec<WritePath>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<ContextDelete> {
    obj.req("paths", cx.sink)?;
    let mut paths = Vec::new();
    for (src, at) in obj.strings("paths", cx.sink)? {
        if let Some(p) = cx.write_path(src, &at) {
            if p.append {
                cx.sink.error_fix(
                    &at,
                    format!("`{src}` cannot be deleted with `[+]`"),
                    "name the list itself, without `[+]`",
                );
            } else {
                paths.push(p);
            }
        }
    }
    Some(ContextDelete { paths })
}

impl ContextDelete {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        for p in &self.paths {
            x.delete(p);
        }
        Flow::Next
    }
}
