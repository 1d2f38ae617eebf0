//! Where traces go, read once from the standard OpenTelemetry variables (and `serve`'s
//! `--otlp-endpoint`) by a pure function over a key-value source, so tests pass a map.
//!
//! Export is off unless an endpoint is given. Only OTLP over HTTP with protobuf bodies is
//! spoken; any other protocol or exporter named is an error that says so, not a silent drop.

use std::time::Duration;

use reqwest::Url;
use secrecy::SecretString;

/// The OTLP HTTP path of traces, appended to a base endpoint.
const TRACES_PATH: &str = "v1/traces";
/// Spans waiting to be exported at most (`OTEL_BSP_MAX_QUEUE_SIZE`); past it they are dropped.
pub const DEFAULT_MAX_QUEUE: usize = 2048;
/// The largest queue a variable may ask for.
pub const MAX_QUEUE_CEILING: usize = 65_536;
/// Spans sent in one request at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
pub const DEFAULT_MAX_BATCH: usize = 512;
/// How long a span waits for its batch at most (`OTEL_BSP_SCHEDULE_DELAY`, in ms).
pub const DEFAULT_DELAY: Duration = Duration::from_secs(5);
/// How long one export request may take (`OTEL_EXPORTER_OTLP_TIMEOUT`, in ms).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Headers sent to the collector at most.
const MAX_HEADERS: usize = 32;

/// Where and how spans are exported.
#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// The full URL spans are POSTed to, e.g. `http://collector:4318/v1/traces`.
    pub endpoint: Url,
    /// Headers of every export request (often an API key: never shown).
    pub headers: Vec<(String, SecretString)>,
    /// `service.name` of every span.
    pub service_name: String,
    pub timeout: Duration,
    pub max_queue: usize,
    pub max_batch: usize,
    pub delay: Duration,
}

/// A trace setting that cannot be used: names the variable and the fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{name}: {problem}")]
pub struct TraceConfigError {
    pub name: String,
    pub problem: String,
}

fn invalid(name: &str, problem: impl Into<String>) -> TraceConfigError {
    TraceConfigError {
        name: name.to_owned(),
        problem: problem.into(),
    }
}

impl TraceSettings {
    /// The settings from `var` (the process environment, or a map in tests) and the
    /// `--otlp-endpoint` flag (a base URL, like `OTEL_EXPORTER_OTLP_ENDPOINT`, which it
    /// overrides). `Ok(None)`: traces are off (no endpoint, `OTEL_SDK_DISABLED=true`, or
    /// `OTEL_TRACES_EXPORTER=none`).
    pub fn read(
        var: impl Fn(&str) -> Option<String>,
        flag_endpoint: Option<&str>,
    ) -> Result<Option<TraceSettings>, TraceConfigError> {
        let var = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match var("OTEL_TRACES_EXPORTER").as_deref() {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(other) => {
                return Err(invalid(
                    "OTEL_TRACES_EXPORTER",
                    format!(
                        "`{other}` is not supported; use `otlp` (or `none` to turn traces off)"
                    ),
                ));
            }
        }
        let endpoint = match (flag_endpoint, var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
            (Some(base), _) => Some(("--otlp-endpoint", base_endpoint("--otlp-endpoint", base)?)),
            (None, Some(full)) => Some((
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                parse_endpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &full)?,
            )),
            (None, None) => match var("OTEL_EXPORTER_OTLP_ENDPOINT") {
                Some(base) => Some((
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    base_endpoint("OTEL_EXPORTER_OTLP_ENDPOINT", &base)?,
                )),
                None => None,
            },
        };
        let Some((_, endpoint)) = endpoint else {
            return Ok(None);
        };
        for name in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(p) = var(name) {
                if p != "http/protobuf" {
                    return Err(invalid(
                        name,
                        format!(
                            "`{p}` is not supported; this server exports OTLP over HTTP as `http/protobuf` (unset it, or set it to that)"
                        ),
                    ));
                }
                break;
            }
        }
        let headers = match var("OTEL_EXPORTER_OTLP_TRACES_HEADERS") {
            Some(h) => parse_headers("OTEL_EXPORTER_OTLP_TRACES_HEADERS", &h)?,
            None => match var("OTEL_EXPORTER_OTLP_HEADERS") {
                Some(h) => parse_headers("OTEL_EXPORTER_OTLP_HEADERS", &h)?,
                None => Vec::new(),
            },
        };
        let timeout = match var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
            Some(t) => millis("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", &t)?,
            None => match var("OTEL_EXPORTER_OTLP_TIMEOUT") {
                Some(t) => millis("OTEL_EXPORTER_OTLP_TIMEOUT", &t)?,
                None => DEFAULT_TIMEOUT,
            },
        };
        let max_queue = match var("OTEL_BSP_MAX_QUEUE_SIZE") {
            Some(q) => count("OTEL_BSP_MAX_QUEUE_SIZE", &q, MAX_QUEUE_CEILING)?,
            None => DEFAULT_MAX_QUEUE,
        };
        let max_batch = match var("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") {
            Some(b) => count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &b, MAX_QUEUE_CEILING)?,
            None => DEFAULT_MAX_BATCH,
        }
        .min(max_queue);
        let delay = match var("OTEL_BSP_SCHEDULE_DELAY") {
            Some(d) => millis("OTEL_BSP_SCHEDULE_DELAY", &d)?,
            None => DEFAULT_DELAY,
        };
        Ok(Some(TraceSettings {
            endpoint,
            headers,
            service_name: var("OTEL_SERVICE_NAME").unwrap_or_else(|| "switchboard".to_owned()),
            timeout,
            max_queue,
            max_batch,
            delay,
        }))
    }

    /// The collector as logs may name it: `scheme://host:port`, no path, query or credentials.
    pub fn origin(&self) -> String {
        let e = &self.endpoint;
        format!(
            "{}://{}:{}",
            e.scheme(),
            e.host_str().unwrap_or_default(),
            e.port_or_known_default().unwrap_or_default()
        )
    }
}

/// A full traces URL: `http` or `https`, with a host.
fn parse_endpoint(name: &str, raw: &str) -> Result<Url, TraceConfigError> {
    let url = Url::parse(raw).map_err(|e| {
        invalid(
            name,
            format!("not a URL ({e}); give one such as http://collector:4318"),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid(
            name,
            "must be an http:// or https:// URL with a host, such as http://collector:4318",
        ));
    }
    Ok(url)
}

/// A base endpoint with `v1/traces` appended to its path.
fn base_endpoint(name: &str, raw: &str) -> Result<Url, TraceConfigError> {
    let mut url = parse_endpoint(name, raw)?;
    let path = url.path().trim_end_matches('/').to_owned();
    url.set_path(&format!("{path}/{TRACES_PATH}"));
    Ok(url)
}

/// `key=value` pairs separated by commas, values percent-decoded (the specification's
/// format). A problem names the pair by position, never a value (they are often keys).
fn parse_headers(name: &str, raw: &str) -> Result<Vec<(String, SecretString)>, TraceConfigError> {
    let mut out = Vec::new();
    for (i, pair) in raw
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .enumerate()
    {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(invalid(
                name,
                format!(
                    "entry {} has no `=`; write key=value pairs separated by commas",
                    i + 1
                ),
            ));
        };
        let key = k.trim().to_ascii_lowercase();
        let value = percent_encoding::percent_decode_str(v.trim())
            .decode_utf8()
            .map_err(|_| {
                invalid(
                    name,
                    format!("the value of `{key}` is not UTF-8 once percent-decoded"),
                )
            })?
            .into_owned();
        let valid = reqwest::header::HeaderName::from_bytes(key.as_bytes()).is_ok()
            && reqwest::header::HeaderValue::from_str(&value).is_ok();
        if !valid {
            return Err(invalid(
                name,
                format!(
                    "entry {} (`{key}`) is not a valid HTTP header; check its name and value",
                    i + 1
                ),
            ));
        }
        out.push((key, SecretString::from(value)));
        if out.len() > MAX_HEADERS {
            return Err(invalid(name, format!("more than {MAX_HEADERS} headers")));
        }
    }
    Ok(out)
}

fn millis(name: &str, raw: &str) -> Result<Duration, TraceConfigError> {
    match raw.parse::<u64>() {
        Ok(ms) if ms > 0 && ms <= 600_000 => Ok(Duration::from_millis(ms)),
        _ => Err(invalid(
            name,
            format!("`{raw}` is not a number of milliseconds from 1 to 600000"),
        )),
    }
}

fn count(name: &str, raw: &str, max: usize) -> Result<usize, TraceConfigError> {
    match raw.parse::<usize>() {
        Ok(n) if n > 0 && n <= max => Ok(n),
        _ => Err(invalid(
            name,
            format!("`{raw}` is not a whole number from 1 to {max}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use secrecy::ExposeSecret;

    use super::*;

    fn read(
        vars: &[(&str, &str)],
        flag: Option<&str>,
    ) -> Result<Option<TraceSettings>, TraceConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        TraceSettings::read(|k| map.get(k).cloned(), flag)
    }

    #[test]
    fn off_unless_an_endpoint_is_given() {
        assert!(read(&[], None).unwrap().is_none());
        assert!(read(&[("OTEL_SERVICE_NAME", "x")], None).unwrap().is_none());
        let disabled = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert!(read(&disabled, None).unwrap().is_none());
        let none = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ];
        assert!(read(&none, None).unwrap().is_none());
    }

    #[test]
    fn endpoints_follow_the_specification() {
        let base = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")], None)
            .unwrap()
            .unwrap();
        assert_eq!(base.endpoint.as_str(), "http://c:4318/v1/traces");
        let prefixed = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c/otlp")], None)
            .unwrap()
            .unwrap();
        assert_eq!(prefixed.endpoint.as_str(), "https://c/otlp/v1/traces");
        let full = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:9999/custom"),
        ];
        assert_eq!(
            read(&full, None).unwrap().unwrap().endpoint.as_str(),
            "http://c:9999/custom"
        );
        let flag = read(&full, Some("http://flag:4318")).unwrap().unwrap();
        assert_eq!(flag.endpoint.as_str(), "http://flag:4318/v1/traces");
        assert_eq!(flag.service_name, "switchboard");
        assert_eq!(flag.origin(), "http://flag:4318");
    }

    #[test]
    fn headers_are_read_and_kept_secret() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "api-key=s3cr%3Dt, X-Team = voice",
            ),
            ("OTEL_SERVICE_NAME", "sb-eu"),
        ];
        let s = read(&vars, None).unwrap().unwrap();
        let headers: Vec<(String, String)> = s
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.expose_secret().to_owned()))
            .collect();
        assert_eq!(
            headers,
            [
                ("api-key".into(), "s3cr=t".into()),
                ("x-team".into(), "voice".into())
            ]
        );
        assert_eq!(s.service_name, "sb-eu");
        assert!(!format!("{s:?}").contains("s3cr"));
    }

    #[test]
    fn bad_settings_name_the_variable_and_never_a_header_value() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")],
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://c")],
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ],
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_TRACES_EXPORTER", "zipkin"),
                ],
                "OTEL_TRACES_EXPORTER",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "novalue-s3cret"),
                ],
                "OTEL_EXPORTER_OTLP_HEADERS",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "k=s3cret\u{1}"),
                ],
                "OTEL_EXPORTER_OTLP_HEADERS",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
                ],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_BSP_MAX_QUEUE_SIZE", "10000000"),
                ],
                "OTEL_BSP_MAX_QUEUE_SIZE",
            ),
        ];
        for (vars, name) in cases {
            let e = read(vars, None).unwrap_err();
            assert_eq!(e.name, *name, "{e}");
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
    }
}
