//! `validate`: the first failing check ends the tool with `validation_failed` and its message.

use super::{Exec, Flow, ParseCx};
use crate::diag::child;
use crate::error::{ErrorCode, ToolError};
use crate::reader::Obj;
use crate::template::{Expr, StrTemplate};

pub(crate) const FIELDS: &[&str] = &["type", "rules"];
const RULE_FIELDS: &[&str] = &["check", "message"];

#[derive(Debug)]
pub(crate) struct Validate {
    rules: Vec<(Expr, StrTemplate)>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<Validate> {
    obj.req("rules", cx.sink)?;
    let items = obj.array("rules", cx.sink)?;
    let mut rules = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let ptr = child(&obj.at("rules"), i);
        let Some(rule) = Obj::new(item, &ptr, "a rule", RULE_FIELDS, cx.sink) else {
            continue;
        };
        let check = rule
            .req_str("check", cx.sink)
            .and_then(|s| cx.expr(s, &rule.at("check"), &[]));
        let message = cx.template(&rule, "message", true);
        rule.finish(cx.sink);
        if let (Some(c), Some(m)) = (check, message) {
            rules.push((c, m));
        }
    }
    if items.is_empty() {
        cx.sink.error_fix(
            &obj.at("rules"),
            "`rules` is empty",
            "add `{\"check\": \"params.x > 0\", \"message\": \"…\"}`",
        );
    }
    Some(Validate { rules })
}

impl Validate {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        for (check, message) in &self.rules {
            match x.truth(check) {
                Ok(true) => {}
                Ok(false) => {
                    return match x.render(message) {
                        Ok(m) => Flow::Fail(ToolError::new(ErrorCode::ValidationFailed, m)),
                        Err(e) => Flow::Fail(e),
                    };
                }
                Err(e) => return Flow::Fail(e),
            }
        }
        Flow::Next
    }
}
