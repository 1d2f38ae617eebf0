//! `transform`: map, filter or reduce a list with an expression over `item` (and `acc`).

use std::sync::Arc;

use serde_json::Value;

use super::{Exec, Flow, ParseCx};
use crate::context::WritePath;
use crate::error::{ErrorCode, ToolError};
use crate::json_bounds::{self, Exceeded};
use crate::reader::{Obj, type_name};
use crate::template::{Expr, StrTemplate, ValueTemplate, VarRef, bounded, truthy};

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
        let limit = x.tool.limits.max_template_output;
        // The input is read where it lies (a plain path is borrowed, not copied); each item is
        // bound to `item` in place, and only what the expression makes is new.
        x.with_vars(&[], |vars| {
            let input = match &self.input {
                Input::Template(t) => t.eval_cow(vars, limit),
                Input::Expr(e) => e.eval_cow(vars).and_then(|v| bounded(&v, limit).map(|_| v)),
            }
            .map_err(|e| x.eval_error(e))?;
            let Value::Array(items) = &*input else {
                return Err(x.internal(format!(
                    "the transform input must be a list, found {}",
                    type_name(&input)
                )));
            };
            self.over(x, items)
        })
    }

    /// The op over the input's items.
    fn over(&self, x: &Exec<'_>, items: &[Value]) -> Result<Value, ToolError> {
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
        let mut budget = Budget {
            x,
            items: items.len(),
            spent: 0,
        };
        let eval = |item: &Value, acc: Option<&Arc<Value>>| -> Result<Value, ToolError> {
            let item = ("item", VarRef::borrowed(item));
            let result = match acc {
                None => x.with_vars(&[item], |v| self.expr.eval(v)),
                Some(a) => x.with_vars(&[item, ("acc", VarRef::whole(a))], |v| self.expr.eval(v)),
            };
            result.map_err(|e| x.eval_error(e))
        };
        match self.op {
            Op::Map => {
                let mut out = Vec::with_capacity(budget.items);
                for (i, item) in items.iter().enumerate() {
                    let v = eval(item, None)?;
                    budget.spend(i, &v)?;
                    out.push(v);
                }
                Ok(Value::Array(out))
            }
            Op::Filter => {
                let mut kept = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let v = eval(item, None)?;
                    budget.spend(i, &v)?;
                    if truthy(&v) {
                        kept.push(item.clone());
                    }
                }
                Ok(Value::Array(kept))
            }
            Op::Reduce => {
                // The accumulator is shared, so an expression the engine evaluates views it
                // without copying it for every item.
                let mut acc = Arc::new(match &self.initial {
                    Some(t) => x.eval(t)?,
                    None => Value::Null,
                });
                for (i, item) in items.iter().enumerate() {
                    acc = Arc::new(eval(item, Some(&acc))?);
                    budget.spend(i, &acc)?;
                }
                Ok(Arc::unwrap_or_clone(acc))
            }
        }
    }
}

/// What a transform has produced so far, against `max_transform_output`; each item's result is
/// also held to `max_template_output` and `max_json_depth`, like any template's.
struct Budget<'x, 'a> {
    x: &'x Exec<'a>,
    items: usize,
    spent: usize,
}

impl Budget<'_, '_> {
    /// Counts item `i`'s result, or fails the action once a limit is passed.
    fn spend(&mut self, i: usize, v: &Value) -> Result<(), ToolError> {
        let limits = &self.x.tool.limits;
        let total = limits.max_transform_output;
        let left = total.saturating_sub(self.spent);
        let per_item = limits.max_template_output;
        let depth = limits.json_depth();
        let fail = |what: String| {
            Err(ToolError::new(
                ErrorCode::ToolExecutionFailed,
                format!(
                    "{} failed at {} (transform): {what}",
                    self.x.tool.name(),
                    self.x.at.ptr
                ),
            ))
        };
        match json_bounds::measure(v, left.min(per_item), depth) {
            Ok(size) => {
                self.spent += size;
                Ok(())
            }
            Err(Exceeded::Depth(_)) => fail(format!(
                "the result for item {} nests deeper than {depth} levels (the max_json_depth limit); make `expr` build a flatter value",
                i + 1
            )),
            Err(Exceeded::Size(_)) if left <= per_item => fail(format!(
                "the results passed {total} bytes at item {} of {} (the max_transform_output limit, counted over all items); transform fewer items, or make `expr` return only the fields you need",
                i + 1,
                self.items
            )),
            Err(Exceeded::Size(_)) => fail(format!(
                "the result for item {} is over {per_item} bytes (the max_template_output limit); make `expr` return only the fields you need",
                i + 1
            )),
        }
    }
}
