//! `conditional`: branch on an expression; nesting depth is bounded.

use super::{BlockId, Exec, Flow, ParseCx};
use crate::reader::Obj;
use crate::template::Expr;

pub(crate) const FIELDS: &[&str] = &["type", "if", "then", "else"];

#[derive(Debug)]
pub(crate) struct Conditional {
    condition: Expr,
    then: BlockId,
    otherwise: Option<BlockId>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, depth: usize) -> Option<Conditional> {
    let src = obj.req_str("if", cx.sink);
    let condition = src.and_then(|s| cx.expr(s, &obj.at("if"), &[]));
    let then = match obj.req("then", cx.sink) {
        Some(v) => cx.nested_block(v, &obj.at("then"), depth + 1),
        None => return None,
    };
    let otherwise = obj
        .get("else")
        .map(|v| cx.nested_block(v, &obj.at("else"), depth + 1));
    Some(Conditional {
        condition: condition?,
        then,
        otherwise,
    })
}

impl Conditional {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        match x.truth(&self.condition) {
            Ok(true) => Flow::Enter(self.then),
            Ok(false) => self.otherwise.map_or(Flow::Next, Flow::Enter),
            Err(e) => Flow::Fail(e),
        }
    }
}
