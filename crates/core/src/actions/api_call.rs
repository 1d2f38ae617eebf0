//! `api_call`: an HTTP request, performed by the runtime as an effect.
//!
//! The core renders the request (url, method, query, headers, body) and the retry policy; the
//! runtime retries, signs and guards it. `response` then holds `{status, headers, body}` for later
//! actions, and `response_path` receives the body.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Exec, Flow, ParseCx};
use crate::context::WritePath;
use crate::effect::{EffectOutcome, EffectRequest, HttpRequest};
use crate::error::{ErrorCode, ToolError};
use crate::reader::Obj;
use crate::result::LogLevel;
use crate::template::{Piece, StrTemplate, ValueTemplate};

pub(crate) const FIELDS: &[&str] = &[
    "type",
    "url",
    "method",
    "body",
    "headers",
    "query",
    "timeout",
    "retry_count",
    "retry_delay",
    "on_error",
    "response_path",
    "sign",
];
const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];

#[derive(Debug)]
pub(crate) struct ApiCall {
    url: StrTemplate,
    method: &'static str,
    body: Option<ValueTemplate>,
    headers: Vec<(String, StrTemplate)>,
    query: Vec<(String, ValueTemplate)>,
    timeout_ms: u64,
    retry_count: u32,
    retry_delay_ms: u64,
    continue_on_error: bool,
    response_path: Option<WritePath>,
    sign: bool,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<ApiCall> {
    let url = cx.template(obj, "url", true);
    if let Some(t) = &url {
        let prefix = match t {
            StrTemplate::Literal(s) => Some(s.as_str()),
            StrTemplate::Text(pieces) => match pieces.first() {
                Some(Piece::Lit(s)) => Some(s.as_str()),
                _ => None,
            },
            StrTemplate::Whole(_) => None,
        };
        if let Some(p) = prefix {
            let looks_http = ["http://", "https://"].iter().any(|s| {
                p.starts_with(s) || (s.starts_with(p) && p.len() < s.len() && !p.is_empty())
            });
            if !looks_http {
                cx.sink.error_fix(
                    &obj.at("url"),
                    format!("`{p}` is not an http(s) URL"),
                    "start the URL with `https://`",
                );
            }
        }
    }
    let method = match obj.str("method", cx.sink) {
        None => "POST",
        Some(m) => match METHODS.iter().find(|k| k.eq_ignore_ascii_case(m)) {
            Some(k) => k,
            None => {
                cx.sink.error_fix(
                    &obj.at("method"),
                    format!("unknown HTTP method `{m}`"),
                    format!("use one of {}", crate::reader::list(METHODS)),
                );
                "POST"
            }
        },
    };
    let body = obj
        .get("body")
        .map(|v| cx.value_template(v, &obj.at("body")));
    let headers = obj
        .object("headers", cx.sink)
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| {
                    let at = crate::diag::child(&obj.at("headers"), k);
                    match v {
                        Value::String(s) => cx.compile_template(s, &at).map(|t| (k.clone(), t)),
                        _ => {
                            cx.sink.error_fix(
                                &at,
                                format!("header `{k}` must be a string"),
                                "quote the value",
                            );
                            None
                        }
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let query = obj
        .object("query", cx.sink)
        .map(|q| {
            q.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        cx.value_template(v, &crate::diag::child(&obj.at("query"), k)),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let timeout_s = obj
        .number_in("timeout", 0.001, cx.limits.max_timeout_s, cx.sink)
        .unwrap_or(30.0);
    let retry_count = obj
        .number_in("retry_count", 0.0, 10.0, cx.sink)
        .unwrap_or(3.0) as u32;
    let retry_delay = obj
        .number_in("retry_delay", 0.0, 30.0, cx.sink)
        .unwrap_or(0.5);
    let continue_on_error = match obj.str("on_error", cx.sink) {
        None | Some("fail") => false,
        Some("continue") => true,
        Some(other) => {
            cx.sink.error_fix(
                &obj.at("on_error"),
                format!("unknown on_error `{other}`"),
                "use `fail` or `continue`",
            );
            false
        }
    };
    let response_path = match obj.str("response_path", cx.sink) {
        Some(p) => cx.write_path(p, &obj.at("response_path")),
        None => None,
    };
    let sign = obj.bool("sign", cx.sink).unwrap_or(false);
    Some(ApiCall {
        url: url?,
        method,
        body,
        headers,
        query,
        timeout_ms: (timeout_s * 1000.0).round() as u64,
        retry_count,
        retry_delay_ms: (retry_delay * 1000.0).round() as u64,
        continue_on_error,
        response_path,
        sign,
    })
}

/// How a query value goes on the wire: strings as they are, lists as repeated keys.
fn query_pairs(key: &str, v: Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Null => {}
        Value::String(s) => out.push((key.to_owned(), s)),
        Value::Array(items) => items.into_iter().for_each(|i| query_pairs(key, i, out)),
        other => out.push((key.to_owned(), other.to_string())),
    }
}

/// The host of a URL, for messages (never the path or query, which may hold tokens).
fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = &rest[..end];
    host.rsplit_once('@').map_or(host, |(_, h)| h)
}

impl ApiCall {
    pub(crate) fn is_write(&self) -> bool {
        !matches!(self.method, "GET" | "HEAD")
    }

    /// `scheme://host[:port]` when the URL's origin is written out in the definition (no
    /// template hole before the end of its host and port), so a call can connect ahead.
    pub(crate) fn literal_origin(&self) -> Option<String> {
        let (text, whole) = match &self.url {
            StrTemplate::Literal(s) => (s.as_str(), true),
            StrTemplate::Text(pieces) => match pieces.first() {
                Some(Piece::Lit(s)) => (s.as_str(), false),
                _ => return None,
            },
            StrTemplate::Whole(_) => return None,
        };
        origin_of(text, whole)
    }

    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        match self.request(x) {
            Ok(r) => Flow::Suspend(EffectRequest::Http(r)),
            Err(e) => Flow::Fail(e),
        }
    }

    fn request(&self, x: &Exec<'_>) -> Result<HttpRequest, ToolError> {
        let url = x.render(&self.url)?;
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(x.internal(format!(
                "the URL rendered to `{}`, which is not an http(s) URL",
                host(&url)
            )));
        }
        let mut headers = Vec::with_capacity(self.headers.len());
        for (k, t) in &self.headers {
            headers.push((k.clone(), x.render(t)?));
        }
        let mut query = Vec::new();
        for (k, t) in &self.query {
            query_pairs(k, x.eval(t)?, &mut query);
        }
        let body = match &self.body {
            Some(t) => Some(x.eval(t)?),
            None if self.is_write() => Some(json!({})),
            None => None,
        };
        Ok(HttpRequest {
            method: self.method.to_owned(),
            url,
            query,
            headers,
            body,
            timeout_ms: self.timeout_ms,
            retry_count: self.retry_count,
            retry_delay_ms: self.retry_delay_ms,
            idempotency_key: x.idempotency_key(),
            sign: self.sign,
            max_body_bytes: x.tool.limits.max_response_body,
            max_json_depth: x.tool.limits.json_depth(),
        })
    }

    pub(crate) fn resume(&self, x: &mut Exec<'_>, outcome: EffectOutcome) -> Flow {
        let (body, failure) = match outcome {
            EffectOutcome::Http(resp) => {
                if let Err(e) = x.check_depth(
                    || format!("the response body from {}", self.host_of(x)),
                    &resp.body,
                ) {
                    return Flow::Fail(e);
                }
                let ok = (200..300).contains(&resp.status);
                let failure = (!ok).then(|| {
                    ToolError::new(
                        ErrorCode::ApiCallFailed,
                        format!(
                            "The request to {} failed with HTTP {}.",
                            self.host_of(x),
                            resp.status
                        ),
                    )
                    .with_details(json!({"status": resp.status}))
                });
                let body = resp.body.clone();
                x.st.response = Arc::new(
                    json!({"status": resp.status, "headers": resp.headers, "body": resp.body}),
                );
                (body, failure)
            }
            EffectOutcome::Failed(e) => {
                x.st.response = Arc::new(
                    json!({"status": null, "headers": {}, "body": null, "error": {"code": e.code, "message": e.message}}),
                );
                (Value::Null, Some(e))
            }
            EffectOutcome::Done { .. } => {
                return Flow::Fail(
                    x.internal("an api_call was resumed with a non-HTTP outcome".to_owned()),
                );
            }
        };
        if let Some(e) = failure {
            if !self.continue_on_error {
                return Flow::Fail(e);
            }
            x.log(
                LogLevel::Warn,
                format!("api_call failed and on_error is continue: {e}"),
            );
        }
        if let Some(path) = &self.response_path
            && let Err(e) = x.write(path, body)
        {
            return Flow::Fail(e);
        }
        Flow::Next
    }

    fn host_of(&self, x: &Exec<'_>) -> String {
        x.render(&self.url)
            .map(|u| host(&u).to_owned())
            .unwrap_or_else(|_| "the API".to_owned())
    }
}

/// The origin at the start of `text`; `whole` says `text` is the entire URL (otherwise a
/// template hole follows it, so the authority must end inside `text`).
fn origin_of(text: &str, whole: bool) -> Option<String> {
    let scheme_end = text.find("://")?;
    let scheme = &text[..scheme_end];
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let rest = &text[scheme_end + 3..];
    let end = match rest.find(['/', '?', '#']) {
        Some(i) => i,
        None if whole => rest.len(),
        None => return None,
    };
    let authority = &rest[..end];
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    Some(format!("{}://{authority}", scheme.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_hides_path_query_and_credentials() {
        assert_eq!(
            super::host("https://user:pw@api.example.com:8443/v1/x?token=s"),
            "api.example.com:8443"
        );
        assert_eq!(super::host("http://127.0.0.1/a"), "127.0.0.1");
    }

    #[test]
    fn a_literal_origin_is_one_whose_host_and_port_are_written_out() {
        use super::origin_of;
        let o = |t, whole| origin_of(t, whole);
        assert_eq!(
            o("HTTPS://api.example.com:8443/v1/", false).as_deref(),
            Some("https://api.example.com:8443")
        );
        assert_eq!(
            o("https://api.example.com", true).as_deref(),
            Some("https://api.example.com")
        );
        // A hole right after the host could still be part of it (`.com{{x}}`).
        assert_eq!(o("https://api.example.com", false), None);
        assert_eq!(o("https://api.", false), None);
        assert_eq!(o("https://user:pw@api.example.com/x", true), None);
        assert_eq!(o("ftp://files.example.com/x", true), None);
        assert_eq!(o("https:///x", true), None);
    }
}
