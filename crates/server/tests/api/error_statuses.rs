//! Every error status the server answers is one the OpenAPI document declares for that
//! operation, with the error envelope as its body: a table of requests that each provoke one.

use super::*;

/// One provoked error: method, the documented path, the path sent, which key, the content type,
/// the body, and the status expected.
struct Case {
    method: Method,
    documented: &'static str,
    path: &'static str,
    key: Key,
    content_type: &'static str,
    body: &'static str,
    status: u16,
}

#[derive(Clone, Copy)]
enum Key {
    None,
    Tenant,
    Admin,
}

const fn case(
    method: Method,
    documented: &'static str,
    path: &'static str,
    key: Key,
    content_type: &'static str,
    body: &'static str,
    status: u16,
) -> Case {
    Case {
        method,
        documented,
        path,
        key,
        content_type,
        body,
        status,
    }
}

const JSON: &str = "application/json";

both_backends!(every_error_status_answered_is_declared, |app| {
    let key = app.tenant("acme").await;
    let doc = app.get("/openapi.json", "").await.1;
    let cases = [
        // The body extractor: wrong content type, not JSON, JSON of the wrong shape.
        case(
            Method::POST,
            "/v1/tools",
            "/v1/tools",
            Key::Tenant,
            "text/plain",
            "{}",
            415,
        ),
        case(
            Method::POST,
            "/v1/tools",
            "/v1/tools",
            Key::Tenant,
            JSON,
            "{\"name\": ",
            400,
        ),
        case(
            Method::POST,
            "/v1/calls",
            "/v1/calls",
            Key::Tenant,
            JSON,
            "{\"call_id\": 5}",
            422,
        ),
        case(
            Method::PUT,
            "/v1/agents/{name}",
            "/v1/agents/a",
            Key::Tenant,
            JSON,
            "{\"instructions\": []}",
            422,
        ),
        // A tool definition with problems: 400 with every problem in `details`.
        case(
            Method::POST,
            "/v1/tools",
            "/v1/tools",
            Key::Tenant,
            JSON,
            "{\"name\": \"x\"}",
            400,
        ),
        // Authentication.
        case(
            Method::GET,
            "/v1/tools/{name}",
            "/v1/tools/save_meal",
            Key::None,
            JSON,
            "",
            401,
        ),
        case(
            Method::GET,
            "/v1/tenants",
            "/v1/tenants",
            Key::Tenant,
            JSON,
            "",
            403,
        ),
        case(
            Method::GET,
            "/v1/tools",
            "/v1/tools",
            Key::Admin,
            JSON,
            "",
            403,
        ),
        // Path and query.
        case(
            Method::GET,
            "/v1/tools/{name}",
            "/v1/tools/nope",
            Key::Tenant,
            JSON,
            "",
            404,
        ),
        case(
            Method::DELETE,
            "/v1/calls/{call_id}",
            "/v1/calls/nope",
            Key::Tenant,
            JSON,
            "",
            404,
        ),
        case(
            Method::GET,
            "/v1/tools",
            "/v1/tools?limit=many",
            Key::Tenant,
            JSON,
            "",
            400,
        ),
    ];
    for c in cases {
        let mut req = app
            .client
            .request(c.method.clone(), format!("{}{}", app.base, c.path))
            .header("content-type", c.content_type);
        match c.key {
            Key::None => {}
            Key::Tenant => req = req.bearer_auth(&key),
            Key::Admin => req = req.bearer_auth(&app.admin),
        }
        if !c.body.is_empty() {
            req = req.body(c.body);
        }
        let resp = req.send().await.unwrap();
        let what = format!("{} {}", c.method, c.path);
        assert_eq!(resp.status().as_u16(), c.status, "{what}");
        let body: Value = resp.json().await.unwrap();
        assert!(body["error"]["code"].is_string(), "{what}: {body}");
        assert!(body["error"]["message"].is_string(), "{what}: {body}");
        let op = &doc["paths"][c.documented][c.method.as_str().to_ascii_lowercase()];
        assert!(
            op.is_object(),
            "{what}: no operation {} in the document",
            c.documented
        );
        let declared = &op["responses"][c.status.to_string()];
        assert_eq!(
            declared["content"][JSON]["schema"]["$ref"],
            json!("#/components/schemas/ErrorBody"),
            "{what}: {} is not declared with the error envelope",
            c.status
        );
    }
});

/// `details` is declared as it is: the problems of a definition, or facts about the error.
#[test]
fn the_error_envelope_declares_its_details() {
    let doc = serde_json::to_value(switchboard_server::openapi()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let details = &schemas["ErrorDetail"]["properties"]["details"];
    assert!(details.is_object(), "{}", schemas["ErrorDetail"]);
    let problem = &schemas["Problem"];
    assert_eq!(
        problem["required"],
        json!(["pointer", "message"]),
        "{problem}"
    );
}
