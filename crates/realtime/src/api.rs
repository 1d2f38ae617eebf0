//! OpenAI's call control REST endpoints: accept, reject, refer, hang up — under
//! `/realtime/calls/{call_id}` for Realtime, `/live/sessions/{session_id}` for GPT-Live.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

/// Where OpenAI's API is: the public one, or a simulator on loopback in tests.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// REST base, e.g. `https://api.openai.com/v1`.
    pub api_base: String,
    /// WebSocket base, e.g. `wss://api.openai.com/v1`.
    pub ws_base: String,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints::from_api_base("https://api.openai.com/v1")
    }
}

impl Endpoints {
    /// The WebSocket base follows from the REST base (`https` → `wss`, `http` → `ws`).
    pub fn from_api_base(api_base: &str) -> Endpoints {
        let api_base = api_base.trim_end_matches('/').to_owned();
        let ws_base = if let Some(rest) = api_base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = api_base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            api_base.clone()
        };
        Endpoints { api_base, ws_base }
    }

    /// The call's WebSocket URL.
    pub fn call_socket(&self, call_id: &str) -> String {
        format!("{}/realtime?call_id={}", self.ws_base, encode(call_id))
    }

    /// A GPT-Live session's sideband WebSocket URL.
    pub fn live_sideband(&self, session_id: &str) -> String {
        format!(
            "{}/live/sessions/{}/attach",
            self.ws_base,
            encode(session_id)
        )
    }
}

/// Which OpenAI API answers a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Api {
    /// OpenAI Realtime: the voice model calls the tools itself.
    #[default]
    Realtime,
    /// GPT-Live: the voice model delegates to a backend model, which calls the tools.
    Live,
}

impl Api {
    /// The longest OpenAI keeps a call: a Realtime session lasts at most 60 minutes, a
    /// GPT-Live SIP call at most 2 hours.
    pub fn longest_call(self) -> std::time::Duration {
        match self {
            Api::Realtime => std::time::Duration::from_secs(60 * 60),
            Api::Live => std::time::Duration::from_secs(2 * 60 * 60),
        }
    }

    /// As written in settings and logs: `realtime` or `live`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Realtime => "realtime",
            Api::Live => "live",
        }
    }

    /// The path of a call's control endpoint below the API base.
    fn control_path(self, call_id: &str, action: &str) -> String {
        match self {
            Api::Realtime => format!("/realtime/calls/{}/{action}", encode(call_id)),
            Api::Live => format!("/live/sessions/{}/{action}", encode(call_id)),
        }
    }
}

/// Call ids come from OpenAI but pass through untrusted hands: keep them to URL-safe bytes.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// How long a REFER may take before it counts as failed: the transfer tool then has time
/// left (of its 20 s default) to tell the model, or to try its destination's fallback.
pub const REFER_TIMEOUT: Duration = Duration::from_secs(5);

/// A failed call control request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// OpenAI answered with an error status.
    #[error("OpenAI answered {status} to {action}: {message}")]
    Status {
        action: &'static str,
        status: u16,
        code: Option<String>,
        message: String,
    },
    /// The request did not get an answer.
    #[error("OpenAI could not be reached for {action}: {message}")]
    Transport {
        action: &'static str,
        message: String,
    },
}

impl ApiError {
    /// Worth another try: the request may not have been seen, or the server was busy.
    pub fn is_transient(&self) -> bool {
        match self {
            ApiError::Status { status, .. } => *status == 429 || *status >= 500,
            ApiError::Transport { .. } => true,
        }
    }

    /// The call is gone at OpenAI's end.
    pub fn is_gone(&self) -> bool {
        matches!(self, ApiError::Status { status: 404, .. })
    }
}

/// A client of the call control endpoints.
#[derive(Debug, Clone)]
pub struct CallsApi {
    http: reqwest::Client,
    endpoints: Endpoints,
}

impl CallsApi {
    pub fn new(endpoints: Endpoints) -> CallsApi {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(15))
            // A burst of incoming calls opens many connections at once; keeping them all idle
            // afterwards would cost memory for nothing (the endpoints are called rarely).
            .pool_max_idle_per_host(8)
            .build()
            .unwrap_or_default();
        CallsApi { http, endpoints }
    }

    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// Accepts the call with its session config (`type: "realtime"` is added). Retried with
    /// backoff while the failure is transient: nothing is lost by accepting twice.
    pub async fn accept(
        &self,
        key: &SecretString,
        call_id: &str,
        session: &Value,
    ) -> Result<(), ApiError> {
        let mut body = session.clone();
        if let Value::Object(m) = &mut body {
            m.insert("type".into(), json!("realtime"));
        }
        retry(|| self.post(Api::Realtime, key, call_id, "accept", Some(&body))).await
    }

    /// Accepts a GPT-Live session: `session` is sent wrapped as `{"session": …}`, unchanged
    /// (OpenAI refuses unknown fields, so nothing is added). Retried like [`CallsApi::accept`].
    pub async fn accept_live(
        &self,
        key: &SecretString,
        session_id: &str,
        session: &Value,
    ) -> Result<(), ApiError> {
        let body = json!({ "session": session });
        retry(|| self.post(Api::Live, key, session_id, "accept", Some(&body))).await
    }

    /// Declines a GPT-Live session; GPT-Live requires the SIP status (300–699).
    pub async fn reject_live(
        &self,
        key: &SecretString,
        session_id: &str,
        status_code: u16,
    ) -> Result<(), ApiError> {
        let body = json!({ "status_code": status_code.clamp(300, 699) });
        retry(|| self.post(Api::Live, key, session_id, "reject", Some(&body))).await
    }

    /// Declines the call (`603` by default, `404` when no agent takes it).
    pub async fn reject(
        &self,
        key: &SecretString,
        call_id: &str,
        status_code: Option<u16>,
    ) -> Result<(), ApiError> {
        let body = status_code.map(|s| json!({ "status_code": s }));
        retry(|| self.post(Api::Realtime, key, call_id, "reject", body.as_ref())).await
    }

    /// SIP REFER. Not retried on an error status: the endpoint has no idempotency key, and a
    /// REFER that OpenAI saw must not be sent twice.
    pub async fn refer(
        &self,
        api: Api,
        key: &SecretString,
        call_id: &str,
        target_uri: &str,
    ) -> Result<(), ApiError> {
        let body = json!({ "target_uri": target_uri });
        self.post_within(api, key, call_id, "refer", Some(&body), Some(REFER_TIMEOUT))
            .await
    }

    /// Ends the call. Not retried on an error status, for the same reason as `refer`.
    pub async fn hangup(
        &self,
        api: Api,
        key: &SecretString,
        call_id: &str,
    ) -> Result<(), ApiError> {
        self.post(api, key, call_id, "hangup", None).await
    }

    async fn post(
        &self,
        api: Api,
        key: &SecretString,
        call_id: &str,
        action: &'static str,
        body: Option<&Value>,
    ) -> Result<(), ApiError> {
        self.post_within(api, key, call_id, action, body, None)
            .await
    }

    /// [`CallsApi::post`] bounded by `timeout` rather than the client's 15 s.
    async fn post_within(
        &self,
        api: Api,
        key: &SecretString,
        call_id: &str,
        action: &'static str,
        body: Option<&Value>,
        timeout: Option<Duration>,
    ) -> Result<(), ApiError> {
        let url = format!(
            "{}{}",
            self.endpoints.api_base,
            api.control_path(call_id, action)
        );
        let mut req = self.http.post(url).bearer_auth(key.expose_secret());
        if let Some(b) = body {
            req = req.json(b);
        }
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let started = std::time::Instant::now();
        let resp = req.send().await.map_err(|e| ApiError::Transport {
            action,
            message: if e.is_timeout() {
                "no answer in time".to_owned()
            } else {
                e.without_url().to_string()
            },
        })?;
        let status = resp.status().as_u16();
        metrics::histogram!("switchboard_openai_request_seconds", "action" => action)
            .record(started.elapsed().as_secs_f64());
        if resp.status().is_success() {
            return Ok(());
        }
        let text = resp.text().await.unwrap_or_default();
        let err: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let message = err
            .pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| text.chars().take(200).collect());
        let code = err
            .pointer("/error/code")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Err(ApiError::Status {
            action,
            status,
            code,
            message,
        })
    }
}

/// Tries up to four times, 250 ms → 500 ms → 1 s apart (with jitter), while the error is transient.
async fn retry<F, Fut>(mut op: F) -> Result<(), ApiError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), ApiError>>,
{
    let mut delay = Duration::from_millis(250);
    let mut attempt = 1;
    loop {
        match op().await {
            Err(e) if e.is_transient() && attempt < 4 => {
                tracing::warn!(name: "openai_request_retry", attempt, error = %e, "openai_request_retry");
                tokio::time::sleep(jitter(delay)).await;
                delay *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Half the delay fixed, half random: retries of many calls do not arrive together.
pub(crate) fn jitter(d: Duration) -> Duration {
    let half = d / 2;
    half + half.mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn websocket_base_follows_the_rest_base() {
        let e = Endpoints::from_api_base("https://api.openai.com/v1/");
        assert_eq!(e.ws_base, "wss://api.openai.com/v1");
        assert_eq!(
            e.call_socket("rtc_1 2"),
            "wss://api.openai.com/v1/realtime?call_id=rtc_1%202"
        );
        assert_eq!(
            e.live_sideband("live_1/x"),
            "wss://api.openai.com/v1/live/sessions/live_1%2Fx/attach"
        );
        assert_eq!(
            Api::Live.control_path("live_1", "refer"),
            "/live/sessions/live_1/refer"
        );
        let e = Endpoints::from_api_base("http://127.0.0.1:9/v1");
        assert_eq!(e.ws_base, "ws://127.0.0.1:9/v1");
    }
}
