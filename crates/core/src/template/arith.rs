//! One arithmetic operation on numbers, evaluated without the template engine: `acc + item`,
//! `item.price * 2`, `params.count - 1`, `params.dishes | length + 1`. A `transform` runs its
//! expression once per item, and these are what a `reduce` most often is.
//!
//! The answer is the engine's, or none at all: integers are added, subtracted and multiplied as
//! 64-bit integers (a result out of that range goes to the engine, which widens it), a float on
//! either side makes it float arithmetic (a result that is not finite goes to the engine), and
//! anything that is not a number — strings, lists, `none`, an undefined name — goes to the
//! engine, which concatenates, or raises the error it raises.

use serde_json::{Number, Value};

use super::{Operand, Tok, Vars, operand, tokenize};

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
}

/// `lhs op rhs`, each side a path, `path | length` or a literal.
#[derive(Debug, Clone, PartialEq)]
pub struct Arith {
    lhs: Operand,
    op: ArithOp,
    rhs: Operand,
}

impl Arith {
    /// Recognises exactly one arithmetic operation between two operands; `None` for anything
    /// else (a comparison, a second operator, a call, …).
    pub fn parse(src: &str) -> Option<Arith> {
        let tokens = tokenize(src)?;
        let mut ops = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| matches!(t, Tok::Arith(_) | Tok::Op(_)));
        let (i, tok) = ops.next()?;
        if ops.next().is_some() {
            return None;
        }
        let Tok::Arith(op) = *tok else { return None };
        Some(Arith {
            lhs: operand(&tokens[..i])?,
            op,
            rhs: operand(&tokens[i + 1..])?,
        })
    }

    /// Evaluates, or declines with `None` (the engine then evaluates).
    pub fn eval(&self, vars: &Vars<'_>) -> Option<Value> {
        let a = self.lhs.value(vars)?;
        let b = self.rhs.value(vars)?;
        let (Value::Number(a), Value::Number(b)) = (&*a, &*b) else {
            return None;
        };
        if a.is_f64() || b.is_f64() {
            let (x, y) = (a.as_f64()?, b.as_f64()?);
            let r = match self.op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x * y,
            };
            return Number::from_f64(r).map(Value::Number);
        }
        let (x, y) = (a.as_i64()?, b.as_i64()?);
        let r = match self.op {
            ArithOp::Add => x.checked_add(y),
            ArithOp::Sub => x.checked_sub(y),
            ArithOp::Mul => x.checked_mul(y),
        }?;
        Some(Value::from(r))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::Strategy as _;
    use serde_json::json;

    use super::super::{Expr, VarRef, to_json};
    use super::*;

    /// The engine's answer for `src`, as JSON; `None` when it raises an error.
    fn engine(src: &str, vars: &Vars<'_>) -> Option<Value> {
        let Expr::Jinja {
            compiled, roots, ..
        } = Expr::compile(src).unwrap()
        else {
            panic!("{src} compiled to a path")
        };
        compiled
            .eval(vars.to_minijinja(&roots))
            .ok()
            .and_then(|v| to_json(&v).ok())
    }

    #[test]
    fn arithmetic_is_recognised_and_the_rest_is_not() {
        for src in [
            "acc + item",
            "acc+item.minutes",
            "item.price * 2",
            "params.count - 1",
            "params.count -1",
            "acc + -1",
            "params.dishes | length + 1",
            "2.5 * item",
        ] {
            assert!(Arith::parse(src).is_some(), "{src}");
        }
        for src in [
            "acc",
            "acc + item + 1",
            "acc ** 2",
            "acc / 2",
            "acc // 2",
            "acc % 2",
            "-acc",
            "acc + 1 > 2",
            "acc ~ item",
            "f(acc) + 1",
            "acc + item | abs",
            "(acc + item)",
        ] {
            assert_eq!(Arith::parse(src), None, "{src}");
        }
    }

    /// Where it answers, it answers what the engine does; where the engine would widen,
    /// concatenate or fail, it leaves the expression to the engine.
    #[test]
    fn arithmetic_matches_the_engine() {
        let params = Arc::new(json!({
            "i": 7, "j": -3, "f": 2.5, "big": i64::MAX, "huge": u64::MAX, "s": "ab", "t": "cd",
            "list": [1, 2], "none": null, "yes": true, "whole": 3.0
        }));
        let entries = [("params", VarRef::whole(&params))];
        let vars = Vars::new(&entries);
        let names = [
            "params.i",
            "params.j",
            "params.f",
            "params.big",
            "params.huge",
            "params.s",
            "params.t",
            "params.list",
            "params.none",
            "params.yes",
            "params.whole",
            "params.list | length",
            "1",
            "0.5",
            "-2",
        ];
        let mut answered = 0;
        for a in names {
            for b in names {
                for op in ["+", "-", "*"] {
                    let src = format!("{a} {op} {b}");
                    let arith = Arith::parse(&src).unwrap_or_else(|| panic!("{src}"));
                    if let Some(fast) = arith.eval(&vars) {
                        answered += 1;
                        assert_eq!(Some(fast), engine(&src, &vars), "{src}");
                    }
                }
            }
        }
        assert!(answered > 100, "only {answered} answered directly");
        // Out of range for 64 bits: the engine's wider integers answer.
        let over = Arith::parse("params.big + 1").unwrap();
        assert_eq!(over.eval(&vars), None);
        // A missing name is the engine's error to raise.
        assert_eq!(Arith::parse("params.nope + 1").unwrap().eval(&vars), None);
    }

    #[test]
    fn expressions_use_it() {
        let params = Arc::new(json!({"i": 7}));
        let entries = [("params", VarRef::whole(&params))];
        let vars = Vars::new(&entries);
        let e = Expr::compile("params.i * 6").unwrap();
        assert_eq!(e.eval(&vars).unwrap(), json!(42));
        assert!(e.eval_bool(&vars).unwrap());
        let Expr::Jinja { arith, .. } = e else {
            panic!("not an engine expression")
        };
        assert!(arith.is_some());
    }

    proptest::proptest! {
        /// For any two numbers, the direct answer is the engine's.
        #[test]
        fn arithmetic_never_contradicts_the_engine(
            a in proptest::prop_oneof![
                proptest::prelude::any::<i64>().prop_map(|n| json!(n)),
                (-1e6f64..1e6).prop_map(|n| json!(n)),
                (-100i64..100).prop_map(|n| json!(n)),
            ],
            b in proptest::prop_oneof![
                proptest::prelude::any::<i64>().prop_map(|n| json!(n)),
                (-1e6f64..1e6).prop_map(|n| json!(n)),
                (-100i64..100).prop_map(|n| json!(n)),
            ],
            op in proptest::sample::select(vec!["+", "-", "*"]),
        ) {
            let params = Arc::new(json!({"a": a, "b": b}));
            let entries = [("params", VarRef::whole(&params))];
            let vars = Vars::new(&entries);
            let src = format!("params.a {op} params.b");
            if let Some(fast) = Arith::parse(&src).unwrap().eval(&vars) {
                proptest::prop_assert_eq!(Some(fast), engine(&src, &vars), "{}", src);
            }
        }
    }
}
