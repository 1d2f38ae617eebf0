//! `flag.set` and `flag.clear`: workflow flags, read as `flags.name`.

use std::sync::Arc;

use super::{Exec, Flow, ParseCx};
use crate::reader::Obj;

pub(crate) const FIELDS: &[&str] = &["type", "flags"];

#[derive(Debug)]
pub(crate) struct Flags {
    /// Shared with every write that sets or clears them.
    names: Vec<Arc<str>>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<Flags> {
    obj.req("flags", cx.sink)?;
    let mut names = Vec::new();
    for (name, at) in obj.strings("flags", cx.sink)? {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            cx.sink.error_fix(
                &at,
                format!("flag name `{name}` is not allowed"),
                "use letters, digits and underscores, so it reads as `flags.name`",
            );
        } else {
            names.push(name.into());
        }
    }
    Some(Flags { names })
}

impl Flags {
    pub(crate) fn run(&self, x: &mut Exec<'_>, set: bool) -> Flow {
        for name in &self.names {
            x.flag(name, set);
        }
        Flow::Next
    }
}
