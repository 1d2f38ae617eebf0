//! The error responses that layers shared by many operations give, declared on each operation
//! they can reach (unless the operation declares that status itself): authentication and the
//! rate limit, JSON body extraction, path and query extraction, the database. Declared here
//! once, so a new route cannot forget them and the document says what the server really answers.

use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{Object, Type};
use utoipa::openapi::{ContentBuilder, HeaderBuilder, Ref, RefOr};

/// Adds the shared error responses to every operation of `doc`.
pub fn declare_error_responses(doc: &mut utoipa::openapi::OpenApi) {
    for item in doc.paths.paths.values_mut() {
        let path_params = item.parameters.iter().flatten().any(is_path_param);
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in operations.into_iter().flatten() {
            declare_on(op, path_params);
        }
    }
}

fn is_path_param(p: &RefOr<utoipa::openapi::path::Parameter>) -> bool {
    matches!(p, RefOr::T(p) if p.parameter_in == ParameterIn::Path)
}

fn declare_on(op: &mut Operation, item_path_params: bool) {
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    // The tenant operations use the admin key, which has no rate limit.
    let admin = op.tags.iter().flatten().any(|t| t == "tenants");
    let body = op.request_body.is_some();
    let params = op.parameters.iter().flatten();
    let path_params = item_path_params || params.clone().any(is_path_param);
    let query_params = params
        .clone()
        .any(|p| matches!(p, RefOr::T(p) if p.parameter_in == ParameterIn::Query));
    let mut add = |status: &str, response: Response| {
        op.responses
            .responses
            .entry(status.to_owned())
            .or_insert(RefOr::T(response));
    };
    if body {
        add(
            "400",
            error("The body is not JSON, or a value in it is not acceptable"),
        );
        add(
            "408",
            error("The body did not arrive whole within `--body-read-timeout-ms` of the headers"),
        );
        add(
            "413",
            error("The body is larger than the server's `--max-body-bytes`"),
        );
        add(
            "415",
            error("The body is not sent as `Content-Type: application/json`"),
        );
        add(
            "422",
            error("The body is JSON of the wrong shape (a missing or mistyped field)"),
        );
    } else if path_params || query_params {
        add("400", error("A path or query parameter is not acceptable"));
    }
    if path_params {
        add(
            "404",
            error("Not found (another tenant's resources are not found either)"),
        );
    }
    if secured {
        add(
            "401",
            error("No API key, or one that is unknown or revoked"),
        );
        add(
            "403",
            error(
                "The key may not use this operation (an admin-only endpoint, or a tenant key on one)",
            ),
        );
        if !admin {
            add("429", rate_limited());
        }
        add(
            "503",
            error("The database did not answer in time; try again"),
        );
    }
}

/// A response whose body is the error envelope.
fn error(description: &str) -> Response {
    envelope(description).build()
}

fn envelope(description: &str) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        "application/json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("ErrorBody")))
            .build(),
    )
}

/// 429, with the `Retry-After` the server sends.
fn rate_limited() -> Response {
    envelope("The tenant's request rate is over its limit; retry after `Retry-After` seconds")
        .header(
            "Retry-After",
            HeaderBuilder::new()
                .schema(Some(Object::with_type(Type::Integer)))
                .description(Some("Seconds to wait before retrying"))
                .build(),
        )
        .build()
}
