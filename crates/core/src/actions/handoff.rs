//! `handoff`: make another agent active; the call's tools and instructions change when the tool
//! commits.

use serde_json::json;

use super::{Exec, Flow, ParseCx};
use crate::error::{ErrorCode, ToolError};
use crate::reader::Obj;
use crate::result::{Handoff as HandoffRequest, LogLevel};
use crate::template::StrTemplate;

pub(crate) const FIELDS: &[&str] = &["type", "agent", "reason", "message"];

#[derive(Debug)]
pub(crate) struct Handoff {
    agent: StrTemplate,
    reason: Option<StrTemplate>,
    message: Option<StrTemplate>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<Handoff> {
    let agent = cx.template(obj, "agent", true);
    let reason = cx.template(obj, "reason", false);
    let message = cx.template(obj, "message", false);
    Some(Handoff {
        agent: agent?,
        reason,
        message,
    })
}

impl Handoff {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        let render = |t: &Option<StrTemplate>| t.as_ref().map(|t| x.render(t)).transpose();
        let (agent, reason, message) = match (
            x.render(&self.agent),
            render(&self.reason),
            render(&self.message),
        ) {
            (Ok(a), Ok(r), Ok(m)) => (a, r, m),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Flow::Fail(e),
        };
        if let Some(known) = &x.st.input.agents
            && !known.contains(&agent)
        {
            return Flow::Fail(
                    ToolError::new(ErrorCode::HandoffFailed, format!("There is no agent named '{agent}' to hand the call to. Go on helping the caller yourself."))
                        .with_details(json!({"valid_agents": known})),
                );
        }
        if agent == x.st.ctx.active_agent() {
            x.log(
                LogLevel::Info,
                format!("handoff to `{agent}` skipped: it is already the active agent"),
            );
            return Flow::Next;
        }
        x.st.handoff = Some(HandoffRequest {
            agent,
            reason,
            message,
        });
        Flow::Next
    }
}
