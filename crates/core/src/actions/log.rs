//! `log`: a structured log event, also kept in the invocation record.

use super::{Exec, Flow, ParseCx};
use crate::reader::Obj;
use crate::result::LogLevel;
use crate::template::StrTemplate;

pub(crate) const FIELDS: &[&str] = &["type", "level", "message"];

#[derive(Debug)]
pub(crate) struct Log {
    level: LogLevel,
    message: StrTemplate,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<Log> {
    let level = match obj.str("level", cx.sink) {
        None | Some("info") => LogLevel::Info,
        Some("debug") => LogLevel::Debug,
        Some("warn" | "warning") => LogLevel::Warn,
        Some("error") => LogLevel::Error,
        Some(other) => {
            cx.sink.error_fix(
                &obj.at("level"),
                format!("unknown log level `{other}`"),
                "use `debug`, `info`, `warn` or `error`",
            );
            LogLevel::Info
        }
    };
    Some(Log {
        level,
        message: cx.template(obj, "message", true)?,
    })
}

impl Log {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        match x.render(&self.message) {
            Ok(m) => {
                x.log(self.level, m);
                Flow::Next
            }
            Err(e) => Flow::Fail(e),
        }
    }
}
