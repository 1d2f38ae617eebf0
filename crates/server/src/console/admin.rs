//! The admin pages: the tenants (list, create one with its first key, delete one after a
//! confirmation). Nothing here reads a tenant's tools, agents or calls.

use axum::Form;
use axum::extract::{Path, State};
use axum::response::Response;
use secrecy::ExposeSecret as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_store::Page;

use super::pages::{error_fragment, error_page};
use super::{ConsoleAdmin, render};
use crate::error::ApiError;
use crate::state::AppState;

/// The longest display name the form accepts.
const MAX_NAME: usize = 200;

fn nav(admin: &ConsoleAdmin) -> Value {
    json!({"admin": true, "csrf": admin.csrf, "active": "tenants"})
}

/// The tenants, newest page first (up to a page), for the list.
async fn listing(state: &AppState) -> Result<(Vec<Value>, bool), ApiError> {
    let page = Page {
        limit: Page::MAX_LIMIT,
        after: None,
    };
    let list = state.store.list_tenants(page).await?;
    let rows = list
        .items
        .iter()
        .map(|t| json!({"id": t.id, "name": t.name, "created_at": t.created_at}))
        .collect();
    Ok((rows, list.next.is_some()))
}

pub async fn tenants(State(state): State<AppState>, admin: ConsoleAdmin) -> Response {
    match listing(&state).await {
        Ok((rows, more)) => render(
            "tenants.html",
            json!({"nav": nav(&admin), "tenants": rows, "more": more, "created": null}),
        ),
        Err(e) => error_page(&e),
    }
}

#[derive(Debug, Deserialize)]
pub struct NewTenant {
    /// Missing, it is empty, and the id check names what it must be.
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
}

/// Creates a tenant and its first key, and answers the panel: the list, and the key, shown
/// this once (the answer is `no-store`; the key is kept only as its hash).
pub async fn create(
    State(state): State<AppState>,
    _admin: ConsoleAdmin,
    Form(new): Form<NewTenant>,
) -> Response {
    let id = new.id.trim();
    let name = match new.name.trim() {
        "" => id,
        name => name,
    };
    if name.chars().count() > MAX_NAME {
        return error_fragment(&ApiError::bad_request(format!(
            "the display name can be at most {MAX_NAME} characters; shorten it"
        )));
    }
    if let Err(e) = state
        .store
        .create_tenant(id, name, &Value::Object(Map::new()))
        .await
    {
        return error_fragment(&e.into());
    }
    let created = match state.store.create_api_key(Some(id), "first key").await {
        Ok((_, secret)) => json!({"id": id, "key": secret.expose_secret()}),
        Err(e) => {
            let e: ApiError = e.into();
            return error_fragment(&ApiError {
                message: format!(
                    "tenant `{id}` was created, but its first key was not: {}. Create one with POST /v1/tenants/{id}/api-keys.",
                    e.message
                ),
                ..e
            });
        }
    };
    match listing(&state).await {
        Ok((rows, more)) => render(
            "tenants_panel.html",
            json!({"tenants": rows, "more": more, "created": created}),
        ),
        Err(e) => error_fragment(&e),
    }
}

pub async fn confirm_delete(
    State(state): State<AppState>,
    admin: ConsoleAdmin,
    Path(id): Path<String>,
) -> Response {
    match state.store.get_tenant(&id).await {
        Ok(Some(t)) => render(
            "tenant_delete.html",
            json!({"nav": nav(&admin), "id": t.id, "name": t.name, "created_at": t.created_at}),
        ),
        Ok(None) => error_page(&ApiError::not_found(format!("tenant `{id}`"))),
        Err(e) => error_page(&e.into()),
    }
}

#[derive(Debug, Deserialize)]
pub struct Confirm {
    #[serde(default)]
    confirm: String,
}

/// Deletes a tenant with everything it owns, once its id has been typed again.
pub async fn delete(
    State(state): State<AppState>,
    _admin: ConsoleAdmin,
    Path(id): Path<String>,
    Form(form): Form<Confirm>,
) -> Response {
    if form.confirm.trim() != id {
        return error_fragment(&ApiError::bad_request(format!(
            "type the tenant's id `{id}` in the box to confirm; nothing was deleted"
        )));
    }
    match state.store.delete_tenant(&id).await {
        Ok(true) => render("tenant_deleted.html", json!({"id": id})),
        Ok(false) => error_fragment(&ApiError::not_found(format!("tenant `{id}`"))),
        Err(e) => error_fragment(&e.into()),
    }
}
