//! `respond`: what the model should say; the last one wins.

use super::{Exec, Flow, ParseCx};
use crate::reader::Obj;
use crate::template::StrTemplate;

pub(crate) const FIELDS: &[&str] = &["type", "message"];

#[derive(Debug)]
pub(crate) struct Respond {
    message: StrTemplate,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<Respond> {
    Some(Respond {
        message: cx.template(obj, "message", true)?,
    })
}

impl Respond {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        match x.render(&self.message) {
            Ok(m) => {
                x.st.message = Some(m);
                Flow::Next
            }
            Err(e) => Flow::Fail(e),
        }
    }
}
