//! `transform`: map, filter or reduce a list with an expression over `item` (and `acc`).

use std::sync::Arc;

use serde_json::Value;

use super::{Exec, Flow, ParseCx};
use crate::context::WritePath;
use crate::error::{ErrorCode, ToolError};
use crate::reader::{Obj, type_name};
use crate::template::{Expr, StrTemplate, ValueTemplate, VarRef, truthy};

pub(crate) const FIELDS: &[&str] = &["type", "input", "op", "expr", "initial", "into"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Map,
    Filter,
    Reduce,
}

/// Where the list comes from: a template (`"{{workflow.items}}"`) or a bare expression.
#[derive(Debug)]
enum Input {
    Template(StrTemplate),
    Expr(Expr),
}

#[derive(Debug)]
pub(crate) struct Transform {
    input: Input,
    op: Op,
    expr: Expr,
    initial: Option<ValueTemplate>,
    into: WritePath,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<Transform> {
    let input = obj.req_str("input", cx.sink).and_then(|src| {
        if src.contains("{{") {
            cx.compile_template(src, &obj.at("input"))
                .map(Input::Template)
        } else {
            cx.expr(src, &obj.at("input"), &[]).map(Input::Expr)
        }
    });
    let op = obj.req_str("op", cx.sink).and_then(|s| match s {
        "map" => Some(Op::Map),
        "filter" => Some(Op::Filter),
        "reduce" => Some(Op::Reduce),
        other => {
            cx.sink.error_fix(
                &obj.at("op"),
                format!("unknown transform op `{other}`"),
                "use `map`, `filter` or `reduce`",
            );
            None
        }
    });
    let scopes: &[&str] = if op == Some(Op::Reduce) {
        &["item", "acc"]
    } else {
        &["item"]
    };
    let expr = obj
        .req_str("expr", cx.sink)
        .and_then(|s| cx.expr(s, &obj.at("expr"), scopes));
    let initial = obj
        .get("initial")
        .map(|v| cx.value_template(v, &obj.at("initial")));
    if op == Some(Op::Reduce) && initial.is_none() {
        cx.sink.error_fix(
            &obj.ptr,
            "a `reduce` transform has no `initial`",
            "add `\"initial\"`, e.g. 0 for a sum",
        );
    }
    let into = obj
        .req_str("into", cx.sink)
        .and_then(|s| cx.write_path(s, &obj.at("into")));
    Some(Transform {
        input: input?,
        op: op?,
        expr: expr?,
        initial,
        into: into?,
    })
}

impl Transform {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        match self.compute(x) {
            Ok(v) => match x.write(&self.into, v) {
                Ok(()) => Flow::Next,
                Err(e) => Flow::Fail(e),
            },
            Err(e) => Flow::Fail(e),
        }
    }

    fn compute(&self, x: &Exec<'_>) -> Result<Value, ToolError> {
        let input = match &self.input {
            Input::Template(t) => x.value(t)?,
            Input::Expr(e) => x
                .with_vars(&[], |v| e.eval(v))
                .map_err(|e| x.eval_error(e))?,
        };
        let Value::Array(items) = input else {
            return Err(x.internal(format!(
                "the transform input must be a list, found {}",
                type_name(&input)
            )));
        };
        let max = x.tool.limits.max_transform_items;
        if items.len() > max {
            return Err(ToolError::new(
                ErrorCode::ToolExecutionFailed,
                format!(
                    "{} failed at {}: the transform input has {} items, over the limit of {max}",
                    x.tool.name(),
                    x.at.ptr,
                    items.len()
                ),
            ));
        }
        let eval = |item: &Value, acc: Option<&Value>| -> Result<Value, ToolError> {
            let item = Arc::new(item.clone());
            let acc = acc.map(|a| Arc::new(a.clone()));
            let mut extra = vec![("item", VarRef::whole(&item))];
            if let Some(a) = &acc {
                extra.push(("acc", VarRef::whole(a)));
            }
            x.with_vars(&extra, |v| self.expr.eval(v))
                .map_err(|e| x.eval_error(e))
        };
        match self.op {
            Op::Map => items
                .iter()
                .map(|i| eval(i, None))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Op::Filter => {
                let mut kept = Vec::new();
                for item in items {
                    if truthy(&eval(&item, None)?) {
                        kept.push(item);
                    }
                }
                Ok(Value::Array(kept))
            }
            Op::Reduce => {
                let mut acc = match &self.initial {
                    Some(t) => x.eval(t)?,
                    None => Value::Null,
                };
                for item in &items {
                    acc = eval(item, Some(&acc))?;
                }
                Ok(acc)
            }
        }
    }
}
