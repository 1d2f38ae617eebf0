//! The `api_call` effect: one HTTP request, performed with retries, a circuit breaker per tenant
//! and host, an outbound-address guard and optional Standard Webhooks signing.
//!
//! Redirects are followed hop by hop in [`redirect`], so the tool's headers and body stay with
//! the origin it named.
//!
//! Every failure becomes an [`EffectOutcome::Failed`] whose message names the host only: URL
//! paths and queries may carry tokens, so they never appear in an error or a log line.

use std::error::Error as StdError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode, Url};
use serde_json::{Map, Value};
use standardwebhooks::Webhook;
use switchboard_core::effect::{EffectOutcome, HttpRequest, HttpResponse};
use switchboard_core::error::{ErrorCode, ToolError};
use tracing::Instrument;

mod redirect;
pub mod warm;

use redirect::{Hop, Next, RedirectRefused, redirect_policy};

/// Upper bound of a computed backoff delay, so a large `retry_count` cannot stall a call.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Cloud metadata endpoints, refused even if a range below were ever relaxed.
const METADATA_ADDRESSES: [IpAddr; 3] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
];

/// IPv4 ranges that are not the public internet (network, prefix length).
const FORBIDDEN_V4: [(Ipv4Addr, u8); 15] = [
    (Ipv4Addr::UNSPECIFIED, 8),         // "this network", includes unspecified
    (Ipv4Addr::new(10, 0, 0, 0), 8),    // RFC 1918
    (Ipv4Addr::new(100, 64, 0, 0), 10), // CGNAT (and Alibaba's metadata)
    (Ipv4Addr::new(127, 0, 0, 0), 8),   // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16), // link-local (and most clouds' metadata)
    (Ipv4Addr::new(172, 16, 0, 0), 12), // RFC 1918
    (Ipv4Addr::new(192, 0, 0, 0), 24),  // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),  // documentation
    (Ipv4Addr::new(192, 88, 99, 0), 24), // 6to4 relay anycast
    (Ipv4Addr::new(192, 168, 0, 0), 16), // RFC 1918
    (Ipv4Addr::new(198, 18, 0, 0), 15), // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation
    (Ipv4Addr::new(203, 0, 113, 0), 24), // documentation
    (Ipv4Addr::new(224, 0, 0, 0), 4),   // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),   // reserved, includes broadcast
];

/// IPv6 ranges that are not the public internet (network, prefix length).
const FORBIDDEN_V6: [(Ipv6Addr, u8); 10] = [
    (Ipv6Addr::UNSPECIFIED, 128),
    (Ipv6Addr::LOCALHOST, 128),
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48), // local-use NAT64
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64),     // discard-only
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20),    // documentation (RFC 9637)
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),     // unique local (ULA)
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),    // link-local
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10),    // site-local (deprecated)
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),     // multicast
];

/// Settings of the HTTP effect handler.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Allow calls to loopback, private, link-local, CGNAT, documentation and cloud-metadata
    /// addresses; off in production, on only for local development and tests.
    pub allow_private_networks: bool,
    /// Consecutive failed requests to one host, for one tenant, that open its breaker.
    pub breaker_failure_threshold: u32,
    /// How long an open breaker fails calls fast before it lets one trial request through.
    pub breaker_cooldown: Duration,
    /// Longest `Retry-After` honoured; a longer one is cut to this.
    pub max_retry_after: Duration,
    /// The `User-Agent` of every request.
    pub user_agent: String,
    /// Certificate authorities trusted besides the platform's (a deployment's private CA).
    pub extra_root_certificates: Vec<reqwest::Certificate>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            allow_private_networks: false,
            breaker_failure_threshold: 5,
            breaker_cooldown: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(10),
            user_agent: format!("switchboard/{}", env!("CARGO_PKG_VERSION")),
            extra_root_certificates: Vec::new(),
        }
    }
}

/// Why [`HttpEffects::new`] could not build the handler.
#[derive(Debug, thiserror::Error)]
pub enum HttpSetupError {
    /// The breaker would never close or never open.
    #[error("breaker_failure_threshold is 0; set it to at least 1 (5 is the default)")]
    ZeroThreshold,
    /// reqwest refused the client settings (e.g. a user agent with a line break).
    #[error("could not build the HTTP client: {0}; check user_agent")]
    Client(#[source] reqwest::Error),
}

pub use crate::breaker::BreakerState;
use crate::breaker::{Admission, Breakers, Upstream, Verdict};

/// Performs `api_call` requests for every tenant, sharing one connection pool.
#[derive(Debug)]
pub struct HttpEffects {
    client: reqwest::Client,
    config: HttpConfig,
    /// Breakers of hosts that failed recently, keyed by (tenant id, `host:port`).
    breakers: Breakers,
    /// When each origin was last warmed (see [`warm`]).
    warmed: warm::Warmed,
}

impl HttpEffects {
    /// Builds the handler and its pooled client (no proxy, guarded DNS; redirects are followed
    /// by hand, each hop checked).
    ///
    /// # Errors
    /// [`HttpSetupError`] when `breaker_failure_threshold` is 0 or reqwest refuses the settings.
    pub fn new(config: HttpConfig) -> Result<Self, HttpSetupError> {
        if config.breaker_failure_threshold == 0 {
            return Err(HttpSetupError::ZeroThreshold);
        }
        let mut builder = guarded_client_builder(config.allow_private_networks);
        for cert in &config.extra_root_certificates {
            builder = builder.add_root_certificate(cert.clone());
        }
        let client = builder
            // Redirects are followed by `try_once`, which decides what each hop carries.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(config.user_agent.clone())
            .build()
            .map_err(HttpSetupError::Client)?;
        let breakers = Breakers::new(
            Upstream::ApiCall,
            config.breaker_failure_threshold,
            config.breaker_cooldown,
        );
        Ok(HttpEffects {
            client,
            config,
            breakers,
            warmed: warm::Warmed::default(),
        })
    }

    /// Tells `watch` of every breaker of this handler that opens (once per handler).
    pub fn watch_breakers(&self, watch: crate::breaker::BreakerWatch) {
        self.breakers.watch(watch);
    }

    /// Whether the guard lets requests reach loopback and private addresses (other outbound
    /// handlers, such as MCP clients, follow the same setting).
    pub fn allows_private_networks(&self) -> bool {
        self.config.allow_private_networks
    }

    /// Performs the request with retries; never panics, never returns Err: every failure is an
    /// [`EffectOutcome::Failed`] with the right code.
    pub async fn perform(
        &self,
        tenant_id: &str,
        signing_secret: Option<&str>,
        req: &HttpRequest,
    ) -> EffectOutcome {
        let host = host_for_log(&req.url);
        let span = tracing::info_span!("api_call", method = %req.method, host = %host, tenant = %tenant_id);
        async {
            let started = Instant::now();
            let (outcome, attempts) = match self.prepare(req, signing_secret) {
                Ok(prepared) => self.run_guarded(tenant_id, &prepared, req).await,
                Err(error) => (EffectOutcome::Failed(error), 0),
            };
            log_finished(&outcome, attempts, started.elapsed());
            if attempts > 1 {
                crate::traces::set_current(opentelemetry::KeyValue::new(
                    "http.request.resend_count",
                    i64::from(attempts - 1),
                ));
            }
            outcome
        }
        .instrument(span)
        .await
    }

    /// The breaker state of a tenant and host; `host` is `host:port` as the URL names it
    /// (e.g. `api.example.com:443`, `[::1]:8080`).
    #[must_use]
    pub fn breaker_state(&self, tenant_id: &str, host: &str) -> BreakerState {
        self.breakers.state(tenant_id, &host.to_ascii_lowercase())
    }

    /// Validates and renders the request once; every try reuses the result.
    fn prepare(&self, req: &HttpRequest, secret: Option<&str>) -> Result<Prepared, ToolError> {
        let mut url = parse_url(&req.url)?;
        let host = url.host_str().unwrap_or_default().to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        if !self.config.allow_private_networks {
            check_literal_host(&url)?;
        }
        if !req.query.is_empty() {
            url.query_pairs_mut().extend_pairs(req.query.iter());
        }
        let method = parse_method(&req.method)?;
        let body = req
            .body
            .as_ref()
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::ToolExecutionFailed,
                    format!("could not encode the api_call body as JSON: {e}"),
                )
            })?;
        let mut headers = build_headers(req, body.is_some())?;
        with_trace_context(&mut headers);
        let signer = if req.sign {
            Some(signer(secret)?)
        } else {
            None
        };
        let breaker_key = format!("{host}:{port}");
        Ok(Prepared {
            method,
            url,
            host,
            breaker_key,
            headers,
            body,
            signer,
            timeout: Duration::from_millis(req.timeout_ms),
            max_body_bytes: req.max_body_bytes,
            max_json_depth: req.max_json_depth,
        })
    }

    /// Runs the tries behind the breaker; returns the outcome and the number of tries made.
    async fn run_guarded(
        &self,
        tenant_id: &str,
        p: &Prepared,
        req: &HttpRequest,
    ) -> (EffectOutcome, u32) {
        let ticket = match self.breakers.admit(tenant_id, &p.breaker_key) {
            Admission::Go(ticket) => ticket,
            Admission::Rejected { until } => {
                return (EffectOutcome::Failed(breaker_error(&p.host, until)), 0);
            }
        };
        let (outcome, verdict, attempts) = self.run_tries(p, req).await;
        ticket.settle(verdict);
        (outcome, attempts)
    }

    /// The retry loop: up to `retry_count` retries after the first try.
    async fn run_tries(&self, p: &Prepared, req: &HttpRequest) -> (EffectOutcome, Verdict, u32) {
        let mut attempt: u32 = 0;
        loop {
            attempt = attempt.saturating_add(1);
            let last = attempt > req.retry_count;
            let (reason, retry_after) = match self.try_once(p, &req.idempotency_key, last).await {
                Try::RetryStatus {
                    status,
                    retry_after,
                } => (format!("status {}", status.as_u16()), retry_after),
                Try::Transport(failure) if !last => (failure.reason().to_owned(), None),
                Try::Transport(failure) => {
                    return (
                        EffectOutcome::Failed(failure.to_error(&p.host, p.timeout)),
                        Verdict::Failure,
                        attempt,
                    );
                }
                Try::Response(resp) => {
                    let verdict = Verdict::of_status(resp.status);
                    return (EffectOutcome::Http(resp), verdict, attempt);
                }
                Try::Refused { error, verdict } => {
                    return (EffectOutcome::Failed(error), verdict, attempt);
                }
            };
            let delay = match retry_after {
                Some(d) => d.min(self.config.max_retry_after),
                None => backoff_delay(attempt - 1, req.retry_delay_ms),
            };
            let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            tracing::info!(name: "api_call_retry", attempt, delay_ms, reason = %reason, "api_call_retry");
            tokio::time::sleep(delay).await;
        }
    }

    /// One try: send, then either hand back a retryable status or read the final body.
    async fn try_once(&self, p: &Prepared, idempotency_key: &str, last: bool) -> Try {
        let mut headers = p.headers.clone();
        if let Some(signer) = &p.signer
            && let Err(error) = sign(
                &mut headers,
                signer,
                idempotency_key,
                p.body.as_deref().unwrap_or_default(),
            )
        {
            return Try::Refused {
                error,
                verdict: Verdict::Neutral,
            };
        }
        let mut resp = match self.send_following_redirects(p, &headers).await {
            Ok(resp) => resp,
            Err(failed) => return failed,
        };
        let status = resp.status();
        if !last && is_retryable_status(status) {
            let retry_after = retry_after(resp.headers(), SystemTime::now());
            return Try::RetryStatus {
                status,
                retry_after,
            };
        }
        match read_body(&mut resp, p.max_body_bytes).await {
            Ok(bytes) => match to_response(status, resp.headers(), &bytes, p.max_json_depth) {
                Ok(response) => Try::Response(response),
                Err(TooDeep(depth)) => Try::Refused {
                    error: ToolError::new(
                        ErrorCode::ApiCallFailed,
                        format!(
                            "the response from {} nests JSON {depth} levels deep, over the limit of {} (max_json_depth)",
                            p.host, p.max_json_depth
                        ),
                    ),
                    verdict: Verdict::of_status(status.as_u16()),
                },
            },
            Err(BodyError::TooLarge) => Try::Refused {
                error: ToolError::new(
                    ErrorCode::ApiCallFailed,
                    format!(
                        "the response from {} is larger than {} bytes",
                        p.host, p.max_body_bytes
                    ),
                ),
                verdict: Verdict::of_status(status.as_u16()),
            },
            Err(BodyError::Transport(err)) => classify_send_error(&err, &p.host),
        }
    }

    /// Sends the request and follows its redirects (at most `MAX_REDIRECTS` hops, all within the
    /// tool's timeout), each hop checked by [`redirect::next_hop`]: the tool's headers go only
    /// to its own origin, its body never goes to another one.
    async fn send_following_redirects(
        &self,
        p: &Prepared,
        headers: &HeaderMap,
    ) -> Result<reqwest::Response, Try> {
        let deadline = later(Instant::now(), p.timeout);
        let mut hop = Hop::first(p.method.clone(), p.url.clone(), p.body.is_some());
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(Try::Transport(TransportFailure::Timeout));
            }
            let mut builder = self
                .client
                .request(hop.method.clone(), hop.url.clone())
                .headers(hop.headers(headers))
                .timeout(remaining);
            if hop.with_body
                && let Some(body) = &p.body
            {
                builder = builder.body(body.clone());
            }
            let resp = builder
                .send()
                .await
                .map_err(|err| classify_send_error(&err, &p.host))?;
            let allow_private = self.config.allow_private_networks;
            match redirect::next_hop(&p.url, &hop, resp.status(), resp.headers(), allow_private) {
                Next::Final => return Ok(resp),
                Next::Follow(next) => hop = next,
                Next::Refused(refused) => {
                    return Err(Try::Refused {
                        error: redirect_error(&p.host, &refused),
                        verdict: Verdict::Neutral,
                    });
                }
            }
        }
    }
}

/// A request rendered once for all its tries.
struct Prepared {
    method: Method,
    url: Url,
    host: String,
    breaker_key: String,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
    signer: Option<Webhook>,
    timeout: Duration,
    max_body_bytes: usize,
    max_json_depth: usize,
}

/// What one try produced.
enum Try {
    /// A retryable status while tries remain; the body is not read.
    RetryStatus {
        status: StatusCode,
        retry_after: Option<Duration>,
    },
    /// The final response.
    Response(HttpResponse),
    /// The network failed (connect, timeout, reset); retryable.
    Transport(TransportFailure),
    /// The request must not be retried (guard, redirect, oversized body).
    Refused { error: ToolError, verdict: Verdict },
}

/// How a transport failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TransportFailure {
    Connect,
    Timeout,
    /// The connection broke after it was made (reset, truncated response).
    Broken,
}

impl TransportFailure {
    /// The `reason` field of `api_call_retry`.
    fn reason(self) -> &'static str {
        match self {
            TransportFailure::Connect => "connect_error",
            TransportFailure::Timeout => "timeout",
            TransportFailure::Broken => "connection_error",
        }
    }

    /// The error after the last try; names the host only.
    fn to_error(self, host: &str, timeout: Duration) -> ToolError {
        match self {
            TransportFailure::Connect => ToolError::new(
                ErrorCode::ApiCallFailed,
                format!("could not connect to {host}"),
            ),
            TransportFailure::Timeout => ToolError::new(
                ErrorCode::Timeout,
                format!("{host} did not answer within {} s", timeout.as_secs_f64()),
            ),
            TransportFailure::Broken => ToolError::new(
                ErrorCode::ApiCallFailed,
                format!("the connection to {host} broke before a full response arrived"),
            ),
        }
    }
}

impl Verdict {
    /// A final status of 5xx, 408, 425 or 429 is a failure of the host; anything else is an answer.
    fn of_status(status: u16) -> Verdict {
        if is_failing_status(status) {
            Verdict::Failure
        } else {
            Verdict::Success
        }
    }
}

/// Why a body could not be read.
enum BodyError {
    TooLarge,
    Transport(reqwest::Error),
}

/// Refused: a name resolved to an address the guard forbids.
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves to a private or metadata address, which this server does not call")]
struct ForbiddenAddress {
    host: String,
}

/// A client builder with the outbound guard: no proxy (it would resolve names itself, out of
/// reach of the guard), the guarded resolver, and the guarded redirect policy (checked hops,
/// same origin only). `api_call` and the MCP client pool both build on it; `api_call` replaces
/// the policy with its own hop-by-hop following.
pub fn guarded_client_builder(allow_private: bool) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .dns_resolver(GuardedResolver { allow_private })
        .redirect(redirect_policy(allow_private))
}

/// Resolves names with tokio and refuses any name with a forbidden address among its answers,
/// so the check applies to the very addresses connected to (DNS rebinding cannot slip past).
#[derive(Debug, Clone, Copy)]
struct GuardedResolver {
    allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !allow_private && addrs.iter().any(|a| is_forbidden_address(a.ip())) {
                return Err(Box::new(ForbiddenAddress { host }) as Box<dyn StdError + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Whether the guard refuses `ip`: loopback, private (RFC 1918, ULA), link-local, CGNAT,
/// unspecified, broadcast, multicast, documentation, cloud metadata, and IPv6 forms that embed
/// such an IPv4 address (v4-mapped, v4-compatible, NAT64, 6to4, Teredo).
#[must_use]
pub fn is_forbidden_address(ip: IpAddr) -> bool {
    if METADATA_ADDRESSES.contains(&ip) {
        return true;
    }
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    FORBIDDEN_V4.iter().any(|&(net, len)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        u32::from(ip) & mask == u32::from(net) & mask
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> bool {
    if embedded_v4(ip).is_some_and(forbidden_v4) {
        return true;
    }
    FORBIDDEN_V6.iter().any(|&(net, len)| {
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        u128::from(ip) & mask == u128::from(net) & mask
    })
}

/// The IPv4 address an IPv6 address stands for, when it is one of the forms that reach an
/// IPv4 host (a v4-mapped address is connected to as IPv4 by the kernel).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let seg = ip.segments();
    let o = ip.octets();
    let low32 = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match seg {
        [0, 0, 0, 0, 0, 0xffff, _, _]
        | [0, 0, 0, 0, 0, 0, _, _]
        | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low32),
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        // Teredo: the client's address is stored inverted in the low 32 bits.
        [0x2001, 0, ..] => Some(Ipv4Addr::from(!u32::from(low32))),
        _ => None,
    }
}

/// Parses the URL, accepting only absolute http(s) URLs with a host.
fn parse_url(raw: &str) -> Result<Url, ToolError> {
    // The URL may carry tokens, so the message describes it without quoting it.
    let url = Url::parse(raw).map_err(|_| {
        ToolError::new(
            ErrorCode::ApiCallFailed,
            "the api_call URL is not a valid absolute URL; write it as https://host/path",
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::new(
            ErrorCode::ApiCallFailed,
            format!(
                "the api_call URL uses `{}`; only http and https URLs are called",
                url.scheme()
            ),
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ToolError::new(
            ErrorCode::ApiCallFailed,
            "the api_call URL has no host; write it as https://host/path",
        ));
    }
    Ok(url)
}

/// Refuses an IP-literal host the guard forbids (literals never reach the resolver).
fn check_literal_host(url: &Url) -> Result<(), ToolError> {
    match literal_ip(url) {
        Some(ip) if is_forbidden_address(ip) => {
            Err(guard_error(url.host_str().unwrap_or_default()))
        }
        _ => Ok(()),
    }
}

/// The URL's host when it is an IP literal. The `url` parser has already normalised IPv4
/// literals (`127.1`, `0x7f.1`) to dotted form and bracketed IPv6 ones, so parsing the text is
/// exact.
fn literal_ip(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

fn parse_method(method: &str) -> Result<Method, ToolError> {
    Method::from_bytes(method.to_ascii_uppercase().as_bytes()).map_err(|_| {
        ToolError::new(
            ErrorCode::ApiCallFailed,
            format!("`{method}` is not an HTTP method; use GET, POST, PUT, PATCH, DELETE or HEAD"),
        )
    })
}

/// Adds the `traceparent` (and `tracestate`) of the current span (the `api_call`'s, when
/// traces are on), so the upstream's spans join the call's trace; a tool that sets its own
/// `traceparent` keeps it.
fn with_trace_context(headers: &mut HeaderMap) {
    let traceparent = HeaderName::from_static("traceparent");
    if headers.contains_key(&traceparent) {
        return;
    }
    let Some((parent, state)) = crate::traces::current_headers() else {
        return;
    };
    if let Ok(v) = HeaderValue::from_str(&parent) {
        headers.insert(traceparent, v);
    }
    if let Some(v) = state.and_then(|s| HeaderValue::from_str(&s).ok()) {
        headers.insert(HeaderName::from_static("tracestate"), v);
    }
}

/// The tool's headers, then Content-Type (unless the tool set one) and the Idempotency-Key.
fn build_headers(req: &HttpRequest, has_body: bool) -> Result<HeaderMap, ToolError> {
    let mut headers = HeaderMap::new();
    for (name, value) in &req.headers {
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ToolError::new(
                ErrorCode::ApiCallFailed,
                format!("`{name}` is not a valid HTTP header name; fix the tool's headers"),
            )
        })?;
        // Header values may be secrets: the message names the header, never its value.
        let value = HeaderValue::from_str(value).map_err(|_| {
            ToolError::new(
                ErrorCode::ApiCallFailed,
                format!("the value of header `{name}` is not a valid HTTP header value; remove line breaks and control characters"),
            )
        })?;
        headers.append(header, value);
    }
    if has_body && !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    let key = HeaderValue::from_str(&req.idempotency_key).map_err(|_| {
        ToolError::new(
            ErrorCode::ToolExecutionFailed,
            "the idempotency key is not a valid HTTP header value",
        )
    })?;
    headers.insert(HeaderName::from_static("idempotency-key"), key);
    Ok(headers)
}

/// The tenant's Standard Webhooks signer.
fn signer(secret: Option<&str>) -> Result<Webhook, ToolError> {
    let secret = secret.ok_or_else(|| {
        ToolError::new(
            ErrorCode::ToolExecutionFailed,
            "the tenant has no signing secret; set one or remove sign",
        )
    })?;
    Webhook::new(secret).map_err(|_| {
        ToolError::new(
            ErrorCode::ToolExecutionFailed,
            "the tenant's signing secret is not a Standard Webhooks secret (whsec_ followed by base64); set a new one",
        )
    })
}

/// Adds `webhook-id`, `webhook-timestamp` and `webhook-signature` over the exact body bytes.
fn sign(headers: &mut HeaderMap, signer: &Webhook, id: &str, body: &[u8]) -> Result<(), ToolError> {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let failed = || {
        ToolError::new(
            ErrorCode::ToolExecutionFailed,
            "could not sign the api_call request",
        )
    };
    let signature = signer.sign(id, timestamp, body).map_err(|_| failed())?;
    let pairs = [
        (standardwebhooks::HEADER_WEBHOOK_ID, id.to_owned()),
        (
            standardwebhooks::HEADER_WEBHOOK_TIMESTAMP,
            timestamp.to_string(),
        ),
        (standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature),
    ];
    for (name, value) in pairs {
        let value = HeaderValue::from_str(&value).map_err(|_| failed())?;
        headers.insert(HeaderName::from_static(name), value);
    }
    Ok(())
}

/// Maps a reqwest error to what the retry loop does with it.
fn classify_send_error(err: &reqwest::Error, host: &str) -> Try {
    if let Some(forbidden) = find_source::<ForbiddenAddress>(err) {
        return Try::Refused {
            error: guard_error(&forbidden.host),
            verdict: Verdict::Neutral,
        };
    }
    if let Some(refused) = find_source::<RedirectRefused>(err) {
        return Try::Refused {
            error: redirect_error(host, refused),
            verdict: Verdict::Neutral,
        };
    }
    if err.is_redirect() {
        return Try::Refused {
            error: redirect_error(host, &RedirectRefused::TooMany),
            verdict: Verdict::Neutral,
        };
    }
    // A connect timeout is both: report it as the timeout it is.
    if err.is_timeout() {
        Try::Transport(TransportFailure::Timeout)
    } else if err.is_connect() {
        Try::Transport(TransportFailure::Connect)
    } else {
        Try::Transport(TransportFailure::Broken)
    }
}

/// The first error of type `E` in `err`'s source chain.
fn find_source<'a, E: StdError + 'static>(err: &'a (dyn StdError + 'static)) -> Option<&'a E> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        current = e.source();
    }
    None
}

fn guard_error(host: &str) -> ToolError {
    ToolError::new(
        ErrorCode::ApiCallFailed,
        ForbiddenAddress {
            host: host.to_owned(),
        }
        .to_string(),
    )
}

fn redirect_error(host: &str, refused: &RedirectRefused) -> ToolError {
    ToolError::new(
        ErrorCode::ApiCallFailed,
        format!("{host} answered with {refused}; {}", refused.fix()),
    )
}

fn breaker_error(host: &str, until: Option<Instant>) -> ToolError {
    let wait = crate::breaker::paused(until);
    ToolError::new(
        ErrorCode::UpstreamUnavailable,
        format!(
            "{host} is failing; {wait} after repeated failures. Tell the caller the service is unavailable right now"
        ),
    )
}

/// 408, 425, 429 and 5xx: the server asks to try again or failed.
fn is_failing_status(status: u16) -> bool {
    matches!(status, 408 | 425 | 429 | 500..=599)
}

fn is_retryable_status(status: StatusCode) -> bool {
    is_failing_status(status.as_u16())
}

/// `retry_delay_ms × 2^n` with equal jitter: half the delay is kept, the other half is random,
/// so concurrent callers spread out yet no retry comes sooner than half the nominal delay.
fn backoff_delay(n: u32, base_ms: u64) -> Duration {
    let nominal = base_ms.saturating_mul(1u64.checked_shl(n.min(32)).unwrap_or(u64::MAX));
    let nominal = nominal.min(u64::try_from(MAX_BACKOFF.as_millis()).unwrap_or(u64::MAX));
    let half = nominal / 2;
    Duration::from_millis(half + fastrand::u64(0..=nominal - half))
}

/// The delay a `Retry-After` header asks for: delta-seconds or an HTTP-date (past dates: 0).
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Reads the body chunk by chunk, refusing it as soon as it passes `max` bytes.
async fn read_body(resp: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, BodyError> {
    if resp
        .content_length()
        .is_some_and(|len| len > u64::try_from(max).unwrap_or(u64::MAX))
    {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Transport)? {
        if body.len().saturating_add(chunk.len()) > max {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn to_response(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    max_depth: usize,
) -> Result<HttpResponse, TooDeep> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    Ok(HttpResponse {
        status: status.as_u16(),
        headers: header_object(headers),
        body: parse_body(body, content_type.as_deref(), max_depth)?,
    })
}

/// A JSON body nested this many levels, past `max_json_depth`.
#[derive(Debug, PartialEq, Eq)]
struct TooDeep(usize);

/// Header names (already lower-case in `http`) to string values; repeated headers are joined
/// with ", " as HTTP allows.
fn header_object(headers: &HeaderMap) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        match out.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&value);
            }
            _ => {
                out.insert(name.as_str().to_owned(), Value::String(value.into_owned()));
            }
        }
    }
    out
}

/// JSON when the content type says so (or is absent and the body parses), else the text;
/// an empty body is `null`. JSON nested deeper than `max_depth` is refused before it is
/// parsed, so nothing kept from it is too deep to read back.
fn parse_body(body: &[u8], content_type: Option<&str>, max_depth: usize) -> Result<Value, TooDeep> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    let declared = content_type.is_some_and(is_json_media_type);
    let looks_like_json = || {
        body.iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|b| matches!(b, b'[' | b'{'))
    };
    if (declared || (content_type.is_none() && looks_like_json()))
        && let Some(depth) = switchboard_core::json_bounds::text_deeper_than(body, max_depth)
    {
        return Err(TooDeep(depth));
    }
    if (declared || content_type.is_none())
        && let Ok(value) = serde_json::from_slice(body)
    {
        return Ok(value);
    }
    Ok(Value::String(String::from_utf8_lossy(body).into_owned()))
}

/// `application/json`, `text/json` and any `+json` type, parameters ignored.
fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence == "text/json" || essence.ends_with("+json")
}

/// The host of a raw URL for the span, never its path or query.
fn host_for_log(raw: &str) -> String {
    Url::parse(raw)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `now + d`, saturating far in the future instead of overflowing.
fn later(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600)))
        .unwrap_or(now)
}

fn log_finished(outcome: &EffectOutcome, attempts: u32, elapsed: Duration) {
    let elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    match outcome {
        EffectOutcome::Http(resp) => {
            tracing::info!(name: "api_call_finished", status = resp.status, attempts, elapsed_ms, "api_call_finished");
        }
        EffectOutcome::Failed(error) => {
            tracing::warn!(name: "api_call_finished", error = error.code.as_str(), attempts, elapsed_ms, "api_call_finished");
        }
        EffectOutcome::Done { .. } => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn ip_classification() {
        let table: &[(&str, bool)] = &[
            // IPv4
            ("8.8.8.8", false),
            ("1.1.1.1", false),
            ("93.184.216.34", false),
            ("127.0.0.1", true),
            ("127.255.255.254", true),
            ("10.1.2.3", true),
            ("172.16.0.1", true),
            ("172.31.255.255", true),
            ("172.32.0.1", false),
            ("192.168.1.1", true),
            ("169.254.169.254", true),
            ("169.254.1.1", true),
            ("100.64.0.1", true),
            ("100.127.255.255", true),
            ("100.128.0.1", false),
            ("100.100.100.200", true),
            ("0.0.0.0", true),
            ("255.255.255.255", true),
            ("224.0.0.1", true),
            ("192.0.2.10", true),
            ("198.51.100.7", true),
            ("203.0.113.9", true),
            ("198.18.0.1", true),
            // IPv6
            ("2606:4700:4700::1111", false),
            ("2001:4860:4860::8888", false),
            ("::1", true),
            ("::", true),
            ("fc00::1", true),
            ("fd12:3456::1", true),
            ("fd00:ec2::254", true),
            ("fe80::1", true),
            ("ff02::1", true),
            ("2001:db8::1", true),
            ("3fff::1", true),
            // IPv6 forms of IPv4 addresses
            ("::ffff:127.0.0.1", true),
            ("::ffff:169.254.169.254", true),
            ("::ffff:10.0.0.1", true),
            ("::ffff:8.8.8.8", false),
            ("::127.0.0.1", true),
            ("64:ff9b::7f00:1", true),
            ("64:ff9b::808:808", false),
            ("2002:7f00:1::", true),
            ("2002:808:808::", false),
        ];
        for (text, forbidden) in table {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(is_forbidden_address(ip), *forbidden, "{text}");
        }
    }

    #[test]
    fn backoff_doubles_with_equal_jitter() {
        for n in 0..4 {
            let nominal = 100u64 << n;
            for _ in 0..50 {
                let d = backoff_delay(n, 100).as_millis() as u64;
                assert!(d >= nominal / 2 && d <= nominal, "n={n} d={d}");
            }
        }
        assert!(backoff_delay(60, u64::MAX) <= MAX_BACKOFF);
        assert_eq!(backoff_delay(3, 0), Duration::ZERO);
    }

    #[test]
    fn retry_after_parses_seconds_and_dates() {
        let now = SystemTime::now();
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(3)));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(5));
        headers.insert(RETRY_AFTER, HeaderValue::from_str(&date).unwrap());
        let d = retry_after(&headers, now).unwrap();
        assert!(
            d > Duration::from_secs(3) && d <= Duration::from_secs(5),
            "{d:?}"
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(60));
        headers.insert(RETRY_AFTER, HeaderValue::from_str(&past).unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::ZERO));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers, now), None);
    }

    #[test]
    fn body_parsing_follows_the_content_type() {
        let parse = |body: &[u8], ct: Option<&str>| parse_body(body, ct, 64).unwrap();
        assert_eq!(parse(b"", Some("application/json")), Value::Null);
        assert_eq!(
            parse(br#"{"a":1}"#, Some("application/json; charset=utf-8")),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            parse(br#"{"a":1}"#, Some("application/problem+json")),
            serde_json::json!({"a": 1})
        );
        assert_eq!(parse(br#"{"a":1}"#, None), serde_json::json!({"a": 1}));
        assert_eq!(
            parse(br#"{"a":1}"#, Some("text/plain")),
            Value::String(r#"{"a":1}"#.into())
        );
        assert_eq!(
            parse(b"not json", Some("application/json")),
            Value::String("not json".into())
        );
        assert_eq!(parse(b"hello", None), Value::String("hello".into()));
    }

    /// JSON deeper than the limit is refused, declared or not; text that is not JSON is text.
    #[test]
    fn deep_json_bodies_are_refused() {
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        let at_limit = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert_eq!(
            parse_body(deep.as_bytes(), Some("application/json"), 64),
            Err(TooDeep(65))
        );
        assert_eq!(parse_body(deep.as_bytes(), None, 64), Err(TooDeep(65)));
        assert!(parse_body(at_limit.as_bytes(), Some("application/json"), 64).is_ok());
        assert_eq!(
            parse_body(deep.as_bytes(), Some("text/plain"), 64),
            Ok(Value::String(deep.clone()))
        );
        let prose = format!("see {deep}");
        assert_eq!(
            parse_body(prose.as_bytes(), None, 64),
            Ok(Value::String(prose.clone()))
        );
    }
}
