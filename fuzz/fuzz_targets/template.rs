//! A template and a context: the first line is the template (compiled both as a string template
//! and as a condition), the rest is the JSON the scopes hold. Compiling and rendering report
//! errors, never panic, and output stays within the template output limit.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use switchboard_core::Limits;
use switchboard_core::template::{Expr, StrTemplate, VarRef, Vars};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (source, context) = text.split_once('\n').unwrap_or((text, ""));
    let context: Value = serde_json::from_str(context).unwrap_or_else(|_| json!({}));
    let scope = |name: &str| Arc::new(context.get(name).cloned().unwrap_or_else(|| json!({})));
    let (params, user, call, workflow, agents, flags) = (
        scope("params"),
        scope("user"),
        scope("call"),
        scope("workflow"),
        scope("agents"),
        scope("flags"),
    );
    let entries = [
        ("params", VarRef::whole(&params)),
        ("user", VarRef::whole(&user)),
        ("call", VarRef::whole(&call)),
        ("workflow", VarRef::whole(&workflow)),
        ("agents", VarRef::whole(&agents)),
        ("agent", VarRef::key(&agents, "main")),
        ("flags", VarRef::whole(&flags)),
    ];
    let vars = Vars::new(&entries);
    let limit = Limits::default().max_template_output;
    if let Ok(template) = StrTemplate::compile(source) {
        let _ = template.eval(&vars, limit);
        if let Ok(rendered) = template.render(&vars, limit) {
            assert!(rendered.len() <= limit, "a render passed the output limit");
        }
    }
    if let Ok(condition) = Expr::compile_condition(source) {
        let _ = condition.eval_bool(&vars);
        let _ = condition.variables();
    }
});
