//! Templates and expressions: `{{ expr }}` in any string of an action, compiled once per tool
//! version.
//!
//! A template string is split into literal text and `{{ … }}` holes; each hole is a minijinja
//! *expression* (filters, tests, arithmetic, `a if c else b`), never a statement block, so a
//! template cannot loop. A string that is exactly one hole yields the typed value; anything else
//! renders to a string. Plain paths (`params.meal_type`, `user.id`, `workflow.items[0]`) skip the
//! engine and are looked up directly: most templates are such paths, and this keeps them cheap.
//! Undefined names are errors, never empty strings.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::{self, Write as _};
use std::sync::LazyLock;

use minijinja::value::Value as MjValue;
use minijinja::{Environment, Expression, UndefinedBehavior};
use serde_json::{Map, Value};

mod arith;
mod scope;
pub use arith::{Arith, ArithOp};
use scope::to_json;
pub use scope::{RunScopes, VarRef, Vars};

/// Instructions one evaluation may execute before it is stopped; templates are expressions,
/// so this is only reached by pathological input (huge ranges, deep recursion through filters).
pub const FUEL_PER_EVALUATION: u64 = 20_000;

static ENGINE: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL_PER_EVALUATION));
    env
});

const KEYWORDS: &[&str] = &[
    "true", "false", "none", "True", "False", "None", "not", "and", "or", "in", "is", "if", "else",
];

/// A template that failed to compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TemplateError {
    pub message: String,
    pub fix: Option<String>,
    /// Byte offset in the template's text of the `{{` (or `{%`) at fault, when one is.
    pub at: Option<usize>,
}

impl TemplateError {
    fn new(message: impl Into<String>, fix: impl Into<Option<String>>) -> Self {
        Self {
            message: message.into(),
            fix: fix.into(),
            at: None,
        }
    }

    fn at(mut self, offset: usize) -> Self {
        self.at = Some(offset);
        self
    }

    /// The 1-based line and column (in characters) of the fault in `src`, the template's
    /// text, when the error has a place.
    pub fn line_column(&self, src: &str) -> Option<(usize, usize)> {
        let at = self.at?;
        let before = src.get(..at)?;
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Some((line, before[line_start..].chars().count() + 1))
    }
}

/// A template or expression that failed while it was evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    #[error("{}", undefined_message(expr, name))]
    Undefined { expr: String, name: String },
    #[error("`{expr}`: {message}")]
    Engine { expr: String, message: String },
    #[error(
        "the result is over the limit of {limit} bytes (max_template_output); make the template select less, e.g. one field or a slice"
    )]
    TooLarge { limit: usize },
}

fn undefined_message(expr: &str, name: &str) -> String {
    if expr == name {
        format!("`{name}` is undefined")
    } else {
        format!("`{expr}`: `{name}` is undefined")
    }
}

/// One step of a path: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A plain path such as `params.dishes[0]`, evaluated without the template engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathExpr {
    pub root: String,
    pub segs: Vec<Seg>,
}

impl PathExpr {
    /// Parses `root(.key | [index] | ["key"])*`; `None` when the text is any other expression.
    pub fn parse(src: &str) -> Option<PathExpr> {
        let src = src.trim();
        let mut chars = src.char_indices().peekable();
        let ident = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| -> Option<String> {
            let mut s = String::new();
            while let Some(&(_, c)) = chars.peek() {
                let ok = if s.is_empty() {
                    c.is_ascii_alphabetic() || c == '_'
                } else {
                    c.is_ascii_alphanumeric() || c == '_'
                };
                if !ok {
                    break;
                }
                s.push(c);
                chars.next();
            }
            (!s.is_empty()).then_some(s)
        };
        let root = ident(&mut chars)?;
        if KEYWORDS.contains(&root.as_str()) {
            return None;
        }
        let mut segs = Vec::new();
        while let Some((_, c)) = chars.next() {
            match c {
                '.' => segs.push(Seg::Key(ident(&mut chars)?)),
                '[' => {
                    let mut inner = String::new();
                    loop {
                        let (_, c) = chars.next()?;
                        if c == ']' {
                            break;
                        }
                        inner.push(c);
                    }
                    segs.push(bracket_seg(&inner)?);
                }
                _ => return None,
            }
        }
        Some(PathExpr { root, segs })
    }

    /// Looks the path up; `Err(name)` names the first undefined part.
    pub fn lookup<'v>(&self, vars: &Vars<'v>) -> Result<&'v Value, String> {
        let mut node = vars.get(&self.root).ok_or_else(|| self.root.clone())?;
        for (i, seg) in self.segs.iter().enumerate() {
            let next = match (seg, node) {
                (Seg::Key(k), Value::Object(m)) => crate::field::get(m, k),
                (Seg::Index(i), Value::Array(a)) => a.get(*i),
                _ => None,
            };
            node = next.ok_or_else(|| self.display_prefix(i + 1))?;
        }
        Ok(node)
    }

    fn display_prefix(&self, n: usize) -> String {
        let mut s = self.root.clone();
        for seg in &self.segs[..n] {
            match seg {
                Seg::Key(k) => {
                    s.push('.');
                    s.push_str(k);
                }
                Seg::Index(i) => s.push_str(&format!("[{i}]")),
            }
        }
        s
    }
}

fn bracket_seg(inner: &str) -> Option<Seg> {
    let inner = inner.trim();
    if let Ok(i) = inner.parse::<usize>() {
        return Some(Seg::Index(i));
    }
    let quoted = |q: char| inner.len() >= 2 && inner.starts_with(q) && inner.ends_with(q);
    if quoted('"') || quoted('\'') {
        let key = &inner[1..inner.len() - 1];
        if !key.contains(['\\', '"', '\'']) {
            return Some(Seg::Key(key.to_owned()));
        }
    }
    None
}

/// A compiled expression: a plain path, or a minijinja expression.
pub enum Expr {
    Path(PathExpr),
    Jinja {
        source: String,
        compiled: Box<Expression<'static, 'static>>,
        /// The scopes it reads: only these are bound when it runs.
        roots: Box<[String]>,
        /// The same expression for the direct evaluator, when it is a simple comparison.
        simple: Option<Simple>,
        /// The same expression for the direct evaluator, when it is one arithmetic operation.
        arith: Option<Box<Arith>>,
    },
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Expr({:?})", self.source())
    }
}

impl Expr {
    /// Compiles the text of an expression (without `{{ }}`).
    pub fn compile(source: &str) -> Result<Expr, TemplateError> {
        let source = source.trim();
        if source.is_empty() {
            return Err(TemplateError::new(
                "empty expression",
                Some("write a path such as `params.name`".to_owned()),
            ));
        }
        if let Some(path) = PathExpr::parse(source) {
            return Ok(Expr::Path(path));
        }
        let compiled = ENGINE.compile_expression_owned(source.to_owned()).map_err(|e| {
            let detail = e.detail().unwrap_or("invalid expression");
            TemplateError::new(
                format!("`{source}` does not compile: {}: {detail}", e.kind()),
                Some("check the expression's syntax (Jinja expressions: paths, filters like `| length`, comparisons, `a if cond else b`)".to_owned()),
            )
        })?;
        let roots = compiled.undeclared_variables(false).into_iter().collect();
        let simple = Simple::parse(source);
        let arith = if simple.is_none() {
            Arith::parse(source).map(Box::new)
        } else {
            None
        };
        Ok(Expr::Jinja {
            source: source.to_owned(),
            compiled: Box::new(compiled),
            roots,
            simple,
            arith,
        })
    }

    /// Compiles an expression written either bare (`params.x > 0`) or as one `{{ … }}` hole.
    pub fn compile_condition(source: &str) -> Result<Expr, TemplateError> {
        let t = source.trim();
        if let Some(inner) = t.strip_prefix("{{").and_then(|s| s.strip_suffix("}}"))
            && !inner.contains("{{")
        {
            return Expr::compile(inner);
        }
        Expr::compile(t)
    }

    /// Whether the template engine compiled it (rather than a plain path read directly).
    pub fn uses_engine(&self) -> bool {
        matches!(self, Expr::Jinja { .. })
    }

    /// The expression's text as written.
    pub fn source(&self) -> String {
        match self {
            Expr::Path(p) => p.display_prefix(p.segs.len()),
            Expr::Jinja { source, .. } => source.clone(),
        }
    }

    /// Every variable the expression reads, as dotted names (`params.meal_type`, `user`).
    pub fn variables(&self) -> BTreeSet<String> {
        match self {
            Expr::Path(p) => {
                let mut s = p.root.clone();
                if let Some(Seg::Key(k)) = p.segs.first() {
                    s.push('.');
                    s.push_str(k);
                }
                BTreeSet::from([s])
            }
            Expr::Jinja { compiled, .. } => {
                compiled.undeclared_variables(true).into_iter().collect()
            }
        }
    }

    /// Evaluates to a JSON value.
    /// Evaluates, borrowing the value when the expression is a plain path to it.
    pub fn eval_cow<'v>(&self, vars: &Vars<'v>) -> Result<Cow<'v, Value>, EvalError> {
        match self {
            Expr::Path(p) => {
                p.lookup(vars)
                    .map(Cow::Borrowed)
                    .map_err(|name| EvalError::Undefined {
                        expr: self.source(),
                        name,
                    })
            }
            Expr::Jinja { .. } => self.eval(vars).map(Cow::Owned),
        }
    }

    pub fn eval(&self, vars: &Vars<'_>) -> Result<Value, EvalError> {
        match self {
            Expr::Path(p) => p
                .lookup(vars)
                .cloned()
                .map_err(|name| EvalError::Undefined {
                    expr: self.source(),
                    name,
                }),
            Expr::Jinja {
                simple,
                arith,
                source,
                ..
            } => {
                if let Some(v) = direct(simple, arith, vars) {
                    return Ok(v);
                }
                let out = self.engine_eval(vars)?;
                to_json(&out).map_err(|message| EvalError::Engine {
                    expr: source.clone(),
                    message,
                })
            }
        }
    }

    /// Evaluates for truth, as Jinja does (`none`, `false`, `0`, `""`, `[]`, `{}` are false).
    pub fn eval_bool(&self, vars: &Vars<'_>) -> Result<bool, EvalError> {
        match self {
            Expr::Path(p) => p
                .lookup(vars)
                .map(truthy)
                .map_err(|name| EvalError::Undefined {
                    expr: self.source(),
                    name,
                }),
            Expr::Jinja { simple, arith, .. } => match direct(simple, arith, vars) {
                Some(v) => Ok(truthy(&v)),
                None => Ok(self.engine_eval(vars)?.is_true()),
            },
        }
    }

    /// Runs the template engine; an undefined result is an error (strict undefined).
    fn engine_eval(&self, vars: &Vars<'_>) -> Result<MjValue, EvalError> {
        let Expr::Jinja {
            source,
            compiled,
            roots,
            ..
        } = self
        else {
            return Err(EvalError::Engine {
                expr: self.source(),
                message: "not an engine expression".to_owned(),
            });
        };
        let out = compiled
            .eval(vars.to_minijinja(roots))
            .map_err(|e| engine_error(source, &e))?;
        if out.is_undefined() {
            return Err(EvalError::Undefined {
                expr: source.clone(),
                name: source.clone(),
            });
        }
        Ok(out)
    }

    /// Appends the value's string form to `out`, as text templates render it.
    fn render_into(&self, vars: &Vars<'_>, out: &mut String) -> Result<(), EvalError> {
        match self {
            Expr::Path(p) => {
                let v = p.lookup(vars).map_err(|name| EvalError::Undefined {
                    expr: self.source(),
                    name,
                })?;
                push_display(v, out);
                Ok(())
            }
            Expr::Jinja { .. } => {
                let v = self.eval(vars)?;
                push_display(&v, out);
                Ok(())
            }
        }
    }
}

/// The conditions tools write most (`params.dishes | length > 0`, `params.kind == 'x'`,
/// `not flags.vip`), evaluated directly. Anything it is unsure of (an undefined name, types
/// Jinja compares in its own way) returns `None` and goes to the engine, so results never differ.
#[derive(Debug, Clone, PartialEq)]
pub enum Simple {
    Operand(Operand),
    Not(Operand),
    Compare(Operand, CmpOp, Operand),
}

/// One side of a simple comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Path(PathExpr),
    Length(PathExpr),
    Literal(Value),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Simple {
    /// Recognises a simple expression; `None` for anything else.
    pub fn parse(src: &str) -> Option<Simple> {
        let tokens = tokenize(src)?;
        match tokens.as_slice() {
            [Tok::Word(w), rest @ ..] if w == "not" => Some(Simple::Not(operand(rest)?)),
            _ => {
                let pos = tokens.iter().position(|t| matches!(t, Tok::Op(_)));
                match pos {
                    None => Some(Simple::Operand(operand(&tokens)?)),
                    Some(i) => {
                        let Tok::Op(op) = tokens[i] else { return None };
                        Some(Simple::Compare(
                            operand(&tokens[..i])?,
                            op,
                            operand(&tokens[i + 1..])?,
                        ))
                    }
                }
            }
        }
    }

    /// Evaluates, or declines with `None`.
    pub fn eval(&self, vars: &Vars<'_>) -> Option<Value> {
        match self {
            Simple::Operand(o) => o.eval(vars),
            Simple::Not(o) => {
                let v = o.value(vars)?;
                Some(Value::Bool(!truthy(&v)))
            }
            Simple::Compare(a, op, b) => {
                let (a, b) = (a.value(vars)?, b.value(vars)?);
                compare(&a, *op, &b).map(Value::Bool)
            }
        }
    }
}

impl Operand {
    pub(crate) fn eval(&self, vars: &Vars<'_>) -> Option<Value> {
        self.value(vars).map(Cow::into_owned)
    }

    /// The operand's value, borrowed where it is one already (a path), for comparing.
    pub(crate) fn value<'x>(&'x self, vars: &Vars<'x>) -> Option<Cow<'x, Value>> {
        match self {
            Operand::Literal(v) => Some(Cow::Borrowed(v)),
            Operand::Path(p) => p.lookup(vars).ok().map(Cow::Borrowed),
            Operand::Length(p) => match p.lookup(vars).ok()? {
                Value::Array(a) => Some(Cow::Owned(Value::from(a.len()))),
                Value::Object(o) => Some(Cow::Owned(Value::from(o.len()))),
                Value::String(s) => Some(Cow::Owned(Value::from(s.chars().count()))),
                _ => None,
            },
        }
    }
}

fn compare(a: &Value, op: CmpOp, b: &Value) -> Option<bool> {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => Some(x.cmp(&y)),
            _ => x.as_f64()?.partial_cmp(&y.as_f64()?),
        },
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) if matches!(op, CmpOp::Eq | CmpOp::Ne) => Some(x.cmp(y)),
        (Value::Null, Value::Null) if matches!(op, CmpOp::Eq | CmpOp::Ne) => Some(Ordering::Equal),
        _ => None,
    };
    let ord = ord?;
    Some(match op {
        CmpOp::Eq => ord == Ordering::Equal,
        CmpOp::Ne => ord != Ordering::Equal,
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Le => ord != Ordering::Greater,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Ge => ord != Ordering::Less,
    })
}

/// The direct evaluators' answer, or `None` when the engine must evaluate.
fn direct(simple: &Option<Simple>, arith: &Option<Box<Arith>>, vars: &Vars<'_>) -> Option<Value> {
    match (simple, arith) {
        (Some(s), _) => s.eval(vars),
        (None, Some(a)) => a.eval(vars),
        (None, None) => None,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Word(String),
    Str(String),
    Num(Value),
    Op(CmpOp),
    Arith(ArithOp),
    Pipe,
}

/// Splits a simple expression into tokens; `None` at anything outside the simple grammar.
pub(crate) fn tokenize(src: &str) -> Option<Vec<Tok>> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' || c == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                let ch = *chars.get(i)?;
                i += 1;
                if ch == c {
                    break;
                }
                if ch == '\\' {
                    return None;
                }
                s.push(ch);
            }
            out.push(Tok::Str(s));
        } else if c.is_ascii_digit()
            || (c == '-'
                && chars.get(i + 1).is_some_and(char::is_ascii_digit)
                && !matches!(out.last(), Some(Tok::Word(_) | Tok::Num(_) | Tok::Str(_))))
        {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let v: Value = if text.contains('.') {
                Value::from(text.parse::<f64>().ok()?)
            } else {
                Value::from(text.parse::<i64>().ok()?)
            };
            out.push(Tok::Num(v));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '.' | '[' | ']'))
            {
                i += 1;
            }
            out.push(Tok::Word(chars[start..i].iter().collect()));
        } else if c == '|' {
            out.push(Tok::Pipe);
            i += 1;
        } else if matches!(c, '+' | '-' | '*') {
            // `**` (power) and anything else the engine reads differently stay with the engine.
            if chars.get(i + 1) == Some(&'*') {
                return None;
            }
            out.push(Tok::Arith(match c {
                '+' => ArithOp::Add,
                '-' => ArithOp::Sub,
                _ => ArithOp::Mul,
            }));
            i += 1;
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let (op, n) = match (two.as_str(), c) {
                ("==", _) => (CmpOp::Eq, 2),
                ("!=", _) => (CmpOp::Ne, 2),
                ("<=", _) => (CmpOp::Le, 2),
                (">=", _) => (CmpOp::Ge, 2),
                (_, '<') => (CmpOp::Lt, 1),
                (_, '>') => (CmpOp::Gt, 1),
                _ => return None,
            };
            out.push(Tok::Op(op));
            i += n;
        }
    }
    Some(out)
}

pub(crate) fn operand(tokens: &[Tok]) -> Option<Operand> {
    match tokens {
        [Tok::Str(s)] => Some(Operand::Literal(Value::String(s.clone()))),
        [Tok::Num(n)] => Some(Operand::Literal(n.clone())),
        [Tok::Word(w)] => match w.as_str() {
            "true" | "True" => Some(Operand::Literal(Value::Bool(true))),
            "false" | "False" => Some(Operand::Literal(Value::Bool(false))),
            "none" | "None" => Some(Operand::Literal(Value::Null)),
            _ if KEYWORDS.contains(&w.as_str()) => None,
            _ => PathExpr::parse(w).map(Operand::Path),
        },
        [Tok::Word(w), Tok::Pipe, Tok::Word(f)] if f == "length" || f == "count" => {
            PathExpr::parse(w).map(Operand::Length)
        }
        _ => None,
    }
}

fn engine_error(source: &str, e: &minijinja::Error) -> EvalError {
    if e.kind() == minijinja::ErrorKind::UndefinedError {
        return EvalError::Undefined {
            expr: source.to_owned(),
            name: e.detail().unwrap_or(source).to_owned(),
        };
    }
    let message = match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
    };
    EvalError::Engine {
        expr: source.to_owned(),
        message,
    }
}

/// The size of a template's result as JSON, or `TooLarge` past `limit`; the walk stops there.
pub fn bounded(v: &Value, limit: usize) -> Result<usize, EvalError> {
    crate::json_bounds::size_within(v, limit).ok_or(EvalError::TooLarge { limit })
}

/// Jinja truthiness of a JSON value.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// How a value shows inside text: strings as they are, `null` as nothing, the rest as JSON.
fn push_display(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => out.push_str(s),
        Value::Null => {}
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            // Writing to a String cannot fail.
            let _ = write!(out, "{n}");
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A string with `{{ }}` holes.
#[derive(Debug)]
pub enum StrTemplate {
    /// No holes: the text as written.
    Literal(String),
    /// Exactly one hole and nothing else: evaluates to the typed value.
    Whole(Expr),
    /// Text and holes: renders to a string.
    Text(Vec<Piece>),
}

/// A part of a text template.
#[derive(Debug)]
pub enum Piece {
    Lit(String),
    Hole(Expr),
}

impl StrTemplate {
    /// Compiles a template string.
    pub fn compile(src: &str) -> Result<StrTemplate, TemplateError> {
        let pieces = split(src)?;
        Ok(match pieces.len() {
            0 => StrTemplate::Literal(String::new()),
            1 => match pieces.into_iter().next() {
                Some(Piece::Hole(e)) => StrTemplate::Whole(e),
                Some(Piece::Lit(s)) => StrTemplate::Literal(s),
                None => StrTemplate::Literal(String::new()),
            },
            _ => StrTemplate::Text(pieces),
        })
    }

    /// Whether the string has no holes.
    pub fn is_literal(&self) -> bool {
        matches!(self, StrTemplate::Literal(_))
    }

    /// Every expression in the template.
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            StrTemplate::Literal(_) => Vec::new(),
            StrTemplate::Whole(e) => vec![e],
            StrTemplate::Text(p) => p
                .iter()
                .filter_map(|p| match p {
                    Piece::Hole(e) => Some(e),
                    Piece::Lit(_) => None,
                })
                .collect(),
        }
    }

    /// Evaluates: a whole-string hole keeps its type, anything else becomes a string. Either
    /// way the result takes at most `limit` bytes as JSON.
    pub fn eval(&self, vars: &Vars<'_>, limit: usize) -> Result<Value, EvalError> {
        self.eval_sized(vars, limit).map(|(v, _)| v)
    }

    /// Evaluates as [`StrTemplate::eval`] does, borrowing the value when the template is one
    /// hole holding a plain path (`"{{workflow.items}}"`), so a value only read is not copied.
    pub fn eval_cow<'v>(&self, vars: &Vars<'v>, limit: usize) -> Result<Cow<'v, Value>, EvalError> {
        match self {
            StrTemplate::Whole(e @ Expr::Path(_)) => {
                let v = e.eval_cow(vars)?;
                bounded(&v, limit)?;
                Ok(v)
            }
            _ => self.eval(vars, limit).map(Cow::Owned),
        }
    }

    /// Evaluates, and says about how many bytes the result takes as JSON.
    fn eval_sized(&self, vars: &Vars<'_>, limit: usize) -> Result<(Value, usize), EvalError> {
        match self {
            StrTemplate::Literal(s) => Ok((Value::String(s.clone()), s.len() + 2)),
            StrTemplate::Whole(e) => {
                let v = e.eval(vars)?;
                let size = bounded(&v, limit)?;
                Ok((v, size))
            }
            StrTemplate::Text(_) => {
                let text = self.render(vars, limit)?;
                let size = text.len() + 2;
                Ok((Value::String(text), size))
            }
        }
    }

    /// Renders to a string, whatever the holes hold.
    pub fn render(&self, vars: &Vars<'_>, limit: usize) -> Result<String, EvalError> {
        let mut out = String::new();
        match self {
            StrTemplate::Literal(s) => out.push_str(s),
            StrTemplate::Whole(e) => e.render_into(vars, &mut out)?,
            StrTemplate::Text(pieces) => {
                // Room for the text and a short value per hole, so most renders grow once.
                let room = pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Lit(s) => s.len(),
                        Piece::Hole(_) => 16,
                    })
                    .sum::<usize>();
                out.reserve(room.min(limit));
                for p in pieces {
                    match p {
                        Piece::Lit(s) => out.push_str(s),
                        Piece::Hole(e) => e.render_into(vars, &mut out)?,
                    }
                    if out.len() > limit {
                        return Err(EvalError::TooLarge { limit });
                    }
                }
            }
        }
        if out.len() > limit {
            return Err(EvalError::TooLarge { limit });
        }
        Ok(out)
    }
}

/// How many holes a template string has at most (its `{{`), counted without compiling it.
pub fn hole_count(src: &str) -> usize {
    src.matches("{{").count()
}

/// [`hole_count`] of every string in `v`, at any depth.
pub fn value_hole_count(v: &Value) -> usize {
    match v {
        Value::String(s) => hole_count(s),
        Value::Array(a) => a.iter().map(value_hole_count).sum(),
        Value::Object(o) => o.values().map(value_hole_count).sum(),
        _ => 0,
    }
}

/// Splits a template into literal text and compiled holes.
fn split(src: &str) -> Result<Vec<Piece>, TemplateError> {
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut rest = src;
    let mut trim_next = false;
    loop {
        let Some(open) = rest.find('{') else {
            push_lit(&mut pieces, &mut lit, rest, trim_next);
            break;
        };
        let after = &rest[open + 1..];
        let offset = src.len() - rest.len() + open;
        if after.starts_with('%') || after.starts_with('#') {
            return Err(TemplateError::new(
                format!(
                    "`{{{}` blocks and comments are not supported in tool templates",
                    &after[..1]
                ),
                Some(
                    "use an expression inside `{{ }}`, e.g. `{{ 'yes' if flags.vip else 'no' }}`"
                        .to_owned(),
                ),
            )
            .at(offset));
        }
        if !after.starts_with('{') {
            lit.push_str(&rest[..=open]);
            rest = after;
            continue;
        }
        let before = &rest[..open];
        let body_start = open + 2;
        let close = find_close(&rest[body_start..]).ok_or_else(|| {
            TemplateError::new(
                format!("`{{{{` at byte {offset} is never closed"),
                Some("close the expression with `}}`".to_owned()),
            )
            .at(offset)
        })?;
        let mut body = &rest[body_start..body_start + close];
        let trim_before = body.starts_with('-');
        if trim_before {
            body = &body[1..];
        }
        let trim_after =
            body.ends_with('-') && body[..body.len() - 1].ends_with(char::is_whitespace);
        if trim_after {
            body = &body[..body.len() - 1];
        }
        push_lit(&mut pieces, &mut lit, before, trim_next);
        if trim_before {
            trim_end_lit(&mut pieces);
        }
        let expr = Expr::compile(body).map_err(|e| e.at(offset))?;
        pieces.push(Piece::Hole(expr));
        trim_next = trim_after;
        rest = &rest[body_start + close + 2..];
    }
    // A literal left alone is a plain string; a lone hole with only surrounding whitespace is typed.
    if pieces.len() > 1
        && pieces
            .iter()
            .filter(|p| matches!(p, Piece::Hole(_)))
            .count()
            == 1
    {
        let only_blank = pieces.iter().all(|p| match p {
            Piece::Lit(s) => s.trim().is_empty(),
            Piece::Hole(_) => true,
        });
        if only_blank {
            pieces.retain(|p| matches!(p, Piece::Hole(_)));
        }
    }
    Ok(pieces)
}

fn push_lit(pieces: &mut Vec<Piece>, lit: &mut String, text: &str, trim_start: bool) {
    lit.push_str(text);
    let s = std::mem::take(lit);
    let s = if trim_start {
        s.trim_start().to_owned()
    } else {
        s
    };
    if !s.is_empty() {
        pieces.push(Piece::Lit(s));
    }
}

fn trim_end_lit(pieces: &mut Vec<Piece>) {
    if let Some(Piece::Lit(s)) = pieces.last_mut() {
        let t = s.trim_end().len();
        s.truncate(t);
        if s.is_empty() {
            pieces.pop();
        }
    }
}

/// The offset of the `}}` closing a hole, skipping string literals inside the expression.
fn find_close(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) => {
                if b == b'\\' {
                    i += 1;
                } else if b == q {
                    quote = None;
                }
            }
            None => {
                if b == b'"' || b == b'\'' {
                    quote = Some(b);
                } else if b == b'}' && bytes.get(i + 1) == Some(&b'}') {
                    return Some(i);
                }
            }
        }
        i += 1;
    }
    None
}

/// A JSON value with templates in its strings, at any depth.
#[derive(Debug)]
pub enum ValueTemplate {
    /// Holds no template: used as is.
    Literal(Value),
    Str(StrTemplate),
    Array(Vec<ValueTemplate>),
    Object(Vec<(String, ValueTemplate)>),
}

impl ValueTemplate {
    /// Compiles every string of `v`; `on_error` receives the JSON Pointer suffix and the error.
    pub fn compile(v: &Value, on_error: &mut dyn FnMut(&str, TemplateError)) -> ValueTemplate {
        Self::compile_at(v, "", on_error)
    }

    fn compile_at(
        v: &Value,
        at: &str,
        on_error: &mut dyn FnMut(&str, TemplateError),
    ) -> ValueTemplate {
        let t = match v {
            Value::String(s) => match StrTemplate::compile(s) {
                Ok(StrTemplate::Literal(_)) => return ValueTemplate::Literal(v.clone()),
                Ok(t) => ValueTemplate::Str(t),
                Err(e) => {
                    on_error(at, e);
                    return ValueTemplate::Literal(v.clone());
                }
            },
            Value::Array(a) => ValueTemplate::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| Self::compile_at(x, &crate::diag::child(at, i), on_error))
                    .collect(),
            ),
            Value::Object(o) => ValueTemplate::Object(
                o.iter()
                    .map(|(k, x)| {
                        (
                            k.clone(),
                            Self::compile_at(x, &crate::diag::child(at, k), on_error),
                        )
                    })
                    .collect(),
            ),
            other => return ValueTemplate::Literal(other.clone()),
        };
        if t.exprs().is_empty() {
            ValueTemplate::Literal(v.clone())
        } else {
            t
        }
    }

    /// Every expression at any depth.
    pub fn exprs(&self) -> Vec<&Expr> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a Expr>) {
        match self {
            ValueTemplate::Literal(_) => {}
            ValueTemplate::Str(s) => out.extend(s.exprs()),
            ValueTemplate::Array(a) => a.iter().for_each(|x| x.collect(out)),
            ValueTemplate::Object(o) => o.iter().for_each(|(_, x)| x.collect(out)),
        }
    }

    /// Renders every template inside, keeping the structure. What the templates yield takes at
    /// most `limit` bytes in all (the literal parts are the tool's own and not counted).
    pub fn eval(&self, vars: &Vars<'_>, limit: usize) -> Result<Value, EvalError> {
        let mut left = limit;
        self.eval_within(vars, limit, &mut left)
    }

    fn eval_within(
        &self,
        vars: &Vars<'_>,
        limit: usize,
        left: &mut usize,
    ) -> Result<Value, EvalError> {
        match self {
            ValueTemplate::Literal(v) => Ok(v.clone()),
            ValueTemplate::Str(s) => {
                let (v, size) = s.eval_sized(vars, *left).map_err(|e| match e {
                    EvalError::TooLarge { .. } => EvalError::TooLarge { limit },
                    other => other,
                })?;
                *left = left.saturating_sub(size);
                Ok(v)
            }
            ValueTemplate::Array(a) => a
                .iter()
                .map(|x| x.eval_within(vars, limit, left))
                .collect::<Result<_, _>>()
                .map(Value::Array),
            ValueTemplate::Object(o) => {
                let mut out = Map::with_capacity(o.len());
                for (k, x) in o {
                    out.insert(k.clone(), x.eval_within(vars, limit, left)?);
                }
                Ok(Value::Object(out))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::context::Context;

    use super::*;

    fn with_vars<R>(f: impl FnOnce(&Vars<'_>) -> R) -> R {
        let params = Arc::new(
            json!({"meal_type": "lunch", "dishes": ["soup", "bread"], "count": 3, "note": null}),
        );
        let workflow = Arc::new(json!({"logged": [1, 2]}));
        let agents = Arc::new(json!({"meal": {"last": "soup"}}));
        let entries = [
            ("params", VarRef::whole(&params)),
            ("workflow", VarRef::whole(&workflow)),
            ("agent", VarRef::key(&agents, "meal")),
        ];
        f(&Vars::new(&entries))
    }

    /// (template, expected value) — one line per case.
    #[test]
    fn templates_evaluate() {
        let cases: &[(&str, Value)] = &[
            ("{{params.count}}", json!(3)),
            (
                "{{ params }}",
                json!({"meal_type": "lunch", "dishes": ["soup", "bread"], "count": 3, "note": null}),
            ),
            (
                "I've logged your {{params.meal_type}}!",
                json!("I've logged your lunch!"),
            ),
            ("{{ params.dishes | length }}", json!(2)),
            ("{{ params.dishes[1] }}", json!("bread")),
            ("{{ params.dishes[-1] | upper }}", json!("BREAD")),
            ("{{ params['meal_type'] }}", json!("lunch")),
            ("{{ agent.last }}", json!("soup")),
            ("n={{ params.count * 2 }}", json!("n=6")),
            ("[{{ params.note }}]", json!("[]")),
            ("{{ workflow.logged }}", json!([1, 2])),
            ("{{ params.dishes | join(', ') }}", json!("soup, bread")),
            (
                "{{ {'a': params.count, 'b': [1, 'x']} }}",
                json!({"a": 3, "b": [1, "x"]}),
            ),
            ("{{ 'yes' if params.count > 2 else 'no' }}", json!("yes")),
            ("  {{ params.count }} ", json!(3)),
            ("a {{- ' b ' -}} c", json!("a b c")),
            ("{{ '}}' }}", json!("}}")),
            ("plain { text }", json!("plain { text }")),
        ];
        with_vars(|vars| {
            for (src, want) in cases {
                let t = StrTemplate::compile(src).unwrap_or_else(|e| panic!("{src}: {e}"));
                assert_eq!(
                    &t.eval(vars, 1 << 20)
                        .unwrap_or_else(|e| panic!("{src}: {e}")),
                    want,
                    "{src}"
                );
            }
        });
    }

    /// A run's scopes resolve by name, each to its own value (`agent` to the active agent's
    /// state), both by a path and through the engine; names bound by value come after them, and
    /// a name neither knows is undefined.
    #[test]
    fn run_scopes_resolve_by_name() {
        let call = crate::context::CallInfo {
            id: "rtc_1".into(),
            tenant_id: "acme".into(),
            agent: "meal".into(),
            from: None,
            to: None,
            started_at: "2026-11-24T10:00:00Z".into(),
        };
        let mut context = Context::new(&call, json!({"id": "u-1"}));
        context.workflow = Arc::new(json!({"w": 1}));
        context.agents = Arc::new(json!({"meal": {"a": 2}, "billing": {"a": 3}}));
        context.flags = Arc::new(json!({"vip": true}));
        let one = |k: &str| Arc::new(json!({ k: k }));
        let (params, config, secrets) = (one("params"), one("config"), one("secrets"));
        let (response, result, now) = (one("response"), one("result"), Arc::new(json!("t")));
        let scopes = RunScopes {
            params: &params,
            context: &context,
            config: &config,
            secrets: &secrets,
            response: &response,
            result: &result,
            now: &now,
        };
        let item = json!({"i": 4});
        let extra = [
            ("item", VarRef::borrowed(&item)),
            ("params", VarRef::borrowed(&item)),
        ];
        let vars = Vars::resolved(&scopes, &extra);
        let cases = [
            ("params", json!({"params": "params"})),
            ("user", json!({"id": "u-1"})),
            ("workflow", json!({"w": 1})),
            ("agents", json!({"meal": {"a": 2}, "billing": {"a": 3}})),
            ("agent", json!({"a": 2})),
            ("flags", json!({"vip": true})),
            ("call", serde_json::to_value(&*context.call).unwrap()),
            ("config", json!({"config": "config"})),
            ("secrets", json!({"secrets": "secrets"})),
            ("response", json!({"response": "response"})),
            ("result", json!({"result": "result"})),
            ("now", json!("t")),
            ("item", json!({"i": 4})),
        ];
        for (name, want) in &cases {
            assert_eq!(vars.get(name), Some(want), "{name}");
            let engine = Expr::compile(&format!("{name} | tojson")).unwrap();
            let text = engine.eval(&vars).unwrap();
            let seen: Value = serde_json::from_str(text.as_str().unwrap()).unwrap();
            assert_eq!(&seen, want, "{name} through the engine");
        }
        assert_eq!(vars.get("nope"), None);
        let e = Expr::compile("agent.a + item.i + (params | length)").unwrap();
        assert_eq!(e.eval(&vars).unwrap(), json!(7));
    }

    #[test]
    fn undefined_names_are_errors() {
        with_vars(|vars| {
            for src in [
                "{{ params.missing }}",
                "{{ nothing }}",
                "x {{ params.dishes[5] }}",
                "{{ params.missing | upper }}",
            ] {
                let t = StrTemplate::compile(src).unwrap();
                let err = t.eval(vars, 1000).unwrap_err();
                assert!(matches!(err, EvalError::Undefined { .. }), "{src}: {err:?}");
            }
        });
    }

    #[test]
    fn compile_errors_are_reported() {
        for (src, needle) in [
            ("{{ params. }}", "does not compile"),
            ("{% if x %}y{% endif %}", "not supported"),
            ("hello {{ params.x", "never closed"),
            ("{{ }}", "empty expression"),
        ] {
            let err = StrTemplate::compile(src).unwrap_err();
            assert!(err.message.contains(needle), "{src}: {}", err.message);
        }
    }

    #[test]
    fn output_is_bounded() {
        with_vars(|vars| {
            let t = StrTemplate::compile("{{ 'x' * 100 }}!").unwrap();
            assert!(matches!(
                t.render(vars, 50),
                Err(EvalError::TooLarge { .. })
            ));
        });
    }

    #[test]
    fn fuel_stops_runaway_expressions() {
        with_vars(|vars| {
            let e = Expr::compile("range(100000) | map('string') | join(',')").unwrap();
            assert!(matches!(e.eval(vars), Err(EvalError::Engine { .. })));
        });
    }

    /// The direct evaluator agrees with the engine wherever it answers.
    #[test]
    fn simple_expressions_match_the_engine() {
        let exprs = [
            "params.dishes | length > 0",
            "params.dishes | length == 2",
            "params.meal_type == 'lunch'",
            "params.meal_type != \"lunch\"",
            "params.count >= 3",
            "params.count < 2.5",
            "params.count > -1",
            "not params.note",
            "params.note == none",
            "params.count == 3.0",
            "params.meal_type < 'm'",
            "workflow.logged | count <= 1",
            "agent.last == 'soup'",
            "params.count == 'three'",
        ];
        with_vars(|vars| {
            for src in exprs {
                let simple = Simple::parse(src).unwrap_or_else(|| panic!("{src} should be simple"));
                let Expr::Jinja {
                    compiled, roots, ..
                } = Expr::compile(src).unwrap()
                else {
                    panic!("{src} compiled to a path")
                };
                let engine = to_json(&compiled.eval(vars.to_minijinja(&roots)).unwrap()).unwrap();
                if let Some(fast) = simple.eval(vars) {
                    assert_eq!(truthy(&fast), truthy(&engine), "{src}: {fast} vs {engine}");
                    if !fast.is_boolean() {
                        assert_eq!(fast, engine, "{src}");
                    }
                }
            }
        });
        for not_simple in [
            "a and b",
            "x + 1 > 2",
            "f(x) == 1",
            "x | upper == 'A'",
            "'a' ~ 'b'",
            "x in [1, 2]",
        ] {
            assert_eq!(Simple::parse(not_simple), None, "{not_simple}");
        }
    }

    use proptest::prelude::Strategy as _;

    proptest::proptest! {
        /// For any value in the compared slot, the direct evaluator never contradicts the engine.
        #[test]
        fn simple_expressions_never_contradict_the_engine(
            v in proptest::prop_oneof![
                proptest::prelude::any::<i64>().prop_map(|n| json!(n)),
                (-1e3f64..1e3).prop_map(|n| json!(n)),
                "[a-z]{0,3}".prop_map(|s| json!(s)),
                proptest::prelude::any::<bool>().prop_map(|b| json!(b)),
                proptest::strategy::Just(Value::Null),
                proptest::collection::vec(0i64..3, 0..3).prop_map(|a| json!(a)),
            ],
            op in proptest::sample::select(vec!["==", "!=", "<", "<=", ">", ">="]),
            rhs in proptest::sample::select(vec!["0", "1", "-2", "2.5", "'b'", "''", "true", "none"]),
            length in proptest::prelude::any::<bool>(),
        ) {
            let params = Arc::new(json!({"v": v}));
            let entries = [("params", VarRef::whole(&params))];
            let vars = Vars::new(&entries);
            let lhs = if length { "params.v | length" } else { "params.v" };
            let src = format!("{lhs} {op} {rhs}");
            let simple = Simple::parse(&src).unwrap();
            let Expr::Jinja { compiled, roots, .. } = Expr::compile(&src).unwrap() else { panic!("not jinja") };
            if let (Some(fast), Ok(engine)) = (simple.eval(&vars), compiled.eval(vars.to_minijinja(&roots))) {
                proptest::prop_assert_eq!(truthy(&fast), engine.is_true(), "{}", src);
            }
        }
    }

    #[test]
    fn variables_are_listed() {
        let e = Expr::compile("params.dishes | length > workflow.min").unwrap();
        assert_eq!(
            e.variables(),
            BTreeSet::from(["params.dishes".to_owned(), "workflow.min".to_owned()])
        );
        let p = Expr::compile("user.id").unwrap();
        assert_eq!(p.variables(), BTreeSet::from(["user.id".to_owned()]));
    }
}
