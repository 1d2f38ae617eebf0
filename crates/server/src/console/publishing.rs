//! The editor's publishing: a draft is replayed against the tool's newest calls before it is
//! published, and a draft that would newly fail some of them asks for confirmation, listing
//! those calls; an earlier version can be rolled back to from the versions list.

use axum::Form;
use axum::extract::{Path, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;
use switchboard_runtime::replay::Verdict;
use switchboard_store::Publish;

use super::pages::{draft_value, error_fragment, urlencode};
use super::{Operator, render};
use crate::error::ApiError;
use crate::routes::replay::{MAX_CALLS, ReplayRun, report};
use crate::state::AppState;

/// How many of the tool's newest calls the editor replays (the most a replay takes).
pub(super) const REPLAYED_CALLS: u32 = MAX_CALLS as u32;

/// Who publishes from the console: the session's key, by its id.
fn publisher(op: &Operator, note: &str) -> Publish {
    Publish {
        note: Some(note.to_owned()).filter(|n| !n.trim().is_empty()),
        by: Some(format!("console (key {})", op.key_id)),
    }
}

#[derive(Debug, Deserialize)]
pub struct PublishForm {
    definition: String,
    #[serde(default)]
    note: String,
    /// `yes` once the operator confirmed publishing a draft that newly fails some calls.
    #[serde(default)]
    confirmed: String,
}

pub async fn publish(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Form(form): Form<PublishForm>,
) -> Response {
    let run = async {
        let def = draft_value(&name, &form.definition)?;
        crate::routes::tools::parse(&state, &def)?;
        if form.confirmed != "yes" {
            let run = ReplayRun {
                definition: Some(def.clone()),
                last_calls: Some(REPLAYED_CALLS),
                ..Default::default()
            };
            let r = report(&state, &op.tenant, name.clone(), &run).await?;
            let failing: Vec<_> = r
                .invocations
                .iter()
                .filter(|i| i.verdict == Verdict::NewlyFailing)
                .map(|i| {
                    json!({"call_id": i.call_id, "href": urlencode(&i.call_id),
                           "function_call_id": i.function_call_id, "reason": i.reason})
                })
                .collect();
            if !failing.is_empty() {
                return Ok(render(
                    "confirm_publish.html",
                    json!({"name": name, "failing": failing, "calls": r.calls.len(),
                           "total": r.summary.total, "definition": form.definition,
                           "note": form.note}),
                ));
            }
        }
        let v = state
            .store
            .put_tool(&op.tenant, &def, &publisher(&op, &form.note))
            .await?;
        Ok::<_, ApiError>(render(
            "published.html",
            json!({"name": v.name, "version": v.version, "note": v.note}),
        ))
    };
    match run.await {
        Ok(r) => r,
        Err(e) => error_fragment(&e),
    }
}

#[derive(Debug, Deserialize)]
pub struct RollbackForm {
    version: i64,
}

pub async fn rollback(
    State(state): State<AppState>,
    op: Operator,
    Path(name): Path<String>,
    Form(form): Form<RollbackForm>,
) -> Response {
    let publish = publisher(&op, "");
    match crate::routes::rollback::rollback(&state, &op.tenant, &name, form.version, publish).await
    {
        Ok(v) => render(
            "published.html",
            json!({"name": v.name, "version": v.version, "note": v.note, "reload": true}),
        ),
        Err(e) => error_fragment(&e),
    }
}
