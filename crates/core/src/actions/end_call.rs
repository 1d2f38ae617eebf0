//! `end_call`: say goodbye, then hang up (an effect the runtime performs once the goodbye is said).

use super::{Exec, Flow, ParseCx};
use crate::effect::{EffectOutcome, EffectRequest, EndCallRequest};
use crate::reader::Obj;
use crate::template::StrTemplate;

pub(crate) const FIELDS: &[&str] = &["type", "message"];

#[derive(Debug)]
pub(crate) struct EndCall {
    message: Option<StrTemplate>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<EndCall> {
    Some(EndCall {
        message: cx.template(obj, "message", false),
    })
}

impl EndCall {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        match self.message.as_ref().map(|t| x.render(t)).transpose() {
            Ok(message) => Flow::Suspend(EffectRequest::EndCall(EndCallRequest { message })),
            Err(e) => Flow::Fail(e),
        }
    }

    pub(crate) fn resume(&self, x: &mut Exec<'_>, outcome: EffectOutcome) -> Flow {
        match outcome {
            EffectOutcome::Failed(e) => Flow::Fail(e),
            _ => {
                if let serde_json::Value::Object(m) = std::sync::Arc::make_mut(&mut x.st.result) {
                    m.insert("call".into(), serde_json::json!("ending"));
                }
                Flow::Next
            }
        }
    }
}
