//! Redirects: which hops are followed, and what goes with each one.
//!
//! `api_call` follows redirects itself (its client's reqwest policy is `none`), one hop at a
//! time through [`next_hop`], so that what the tool attached stays with the origin the tool
//! named: on a hop to another origin (scheme, host or port differ) none of the tool's headers go
//! along (API keys, `Authorization`, cookies, signatures, and any other header it set), and a
//! 307 or 308, which must resend the body, is refused rather than handing the body to a host the
//! tool never named. 301, 302 and 303 turn the request into a GET without a body, as browsers
//! and reqwest do. Other clients built on the guard (MCP servers) keep reqwest's policy,
//! [`redirect_policy`], which refuses any hop to another origin: their headers are credentials
//! on every request.

use reqwest::header::{
    CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, LOCATION, TRANSFER_ENCODING,
};
use reqwest::{Method, StatusCode, Url};

use super::check_literal_host;

/// Redirect hops followed before a request is refused.
pub(super) const MAX_REDIRECTS: usize = 5;

/// Refused: a redirect this server does not follow.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum RedirectRefused {
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooMany,
    #[error("a redirect to a `{0}` URL")]
    Scheme(String),
    #[error("a redirect to {0}, which resolves to a private or metadata address")]
    Forbidden(String),
    /// A 307 or 308 (which resend the body) to another origin.
    #[error(
        "a {status} redirect to {origin}, another origin, which would resend the request body there"
    )]
    BodyToOtherOrigin { status: u16, origin: String },
    /// Any hop to another origin, for clients whose every request carries credentials.
    #[error("a redirect to {0}, another origin")]
    OtherOrigin(String),
}

impl RedirectRefused {
    /// What the tool's author can do about it.
    pub(super) fn fix(&self) -> String {
        match self {
            RedirectRefused::TooMany => "call the final URL directly".to_owned(),
            RedirectRefused::Scheme(_) => "only http and https are followed".to_owned(),
            RedirectRefused::Forbidden(_) => {
                "this server does not call private or metadata addresses".to_owned()
            }
            RedirectRefused::BodyToOtherOrigin { origin, .. } => format!(
                "a request body is only sent to the origin the tool names; if {origin} is meant, call it directly"
            ),
            RedirectRefused::OtherOrigin(origin) => format!(
                "headers are only sent to the origin registered; if {origin} is meant, register it"
            ),
        }
    }
}

/// One request of a redirect chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Hop {
    pub(super) method: Method,
    pub(super) url: Url,
    /// Whether the tool's body goes with this request (dropped once a 301/302/303 made it a GET).
    pub(super) with_body: bool,
    /// Whether this request goes to the origin the tool named: only then do its headers go too.
    pub(super) same_origin: bool,
    /// URLs requested so far, this one included.
    pub(super) requested: usize,
}

impl Hop {
    /// The request the tool asked for.
    pub(super) fn first(method: Method, url: Url, has_body: bool) -> Hop {
        Hop {
            method,
            url,
            with_body: has_body,
            same_origin: true,
            requested: 1,
        }
    }

    /// The headers this hop sends: the tool's to its own origin (less the body's own headers
    /// once the body is dropped), none elsewhere.
    pub(super) fn headers(&self, tool_headers: &HeaderMap) -> HeaderMap {
        if !self.same_origin {
            return HeaderMap::new();
        }
        let mut headers = tool_headers.clone();
        if !self.with_body {
            for name in [
                CONTENT_TYPE,
                CONTENT_LENGTH,
                CONTENT_ENCODING,
                TRANSFER_ENCODING,
            ] {
                headers.remove(name);
            }
        }
        headers
    }
}

/// What to do after a response.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Not a redirect (or one without a usable `Location`): this is the response.
    Final,
    /// Request this hop next.
    Follow(Hop),
    /// Stop with this error.
    Refused(RedirectRefused),
}

/// The hop after `current`'s response (`status`, `headers`); `origin` is the URL the tool named.
pub(super) fn next_hop(
    origin: &Url,
    current: &Hop,
    status: StatusCode,
    headers: &HeaderMap,
    allow_private: bool,
) -> Next {
    let keeps_method = match status {
        StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT => true,
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND | StatusCode::SEE_OTHER => false,
        _ => return Next::Final,
    };
    // Like reqwest: a redirect whose Location is missing or unreadable is the answer itself.
    let Some(url) = headers
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|location| current.url.join(location).ok())
    else {
        return Next::Final;
    };
    if let Err(refused) = check_redirect(&url, current.requested, allow_private) {
        return Next::Refused(refused);
    }
    let same_origin = url.origin() == origin.origin();
    let (method, with_body) = if keeps_method {
        (current.method.clone(), current.with_body)
    } else if current.method == Method::HEAD {
        (Method::HEAD, false)
    } else {
        (Method::GET, false)
    };
    if with_body && !same_origin {
        return Next::Refused(RedirectRefused::BodyToOtherOrigin {
            status: status.as_u16(),
            origin: origin_text(&url),
        });
    }
    Next::Follow(Hop {
        method,
        url,
        with_body,
        same_origin,
        requested: current.requested.saturating_add(1),
    })
}

/// `scheme://host:port`, the port always written: what an error may say of a URL (its path and
/// query may carry tokens).
pub(super) fn origin_text(url: &Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or_default()
    )
}

/// Checks one redirect hop: `previous` counts the URLs already requested (the original
/// included), so it equals the hops taken once this one is followed.
pub(super) fn check_redirect(
    next: &Url,
    previous: usize,
    allow_private: bool,
) -> Result<(), RedirectRefused> {
    if previous > MAX_REDIRECTS {
        return Err(RedirectRefused::TooMany);
    }
    if !matches!(next.scheme(), "http" | "https") {
        return Err(RedirectRefused::Scheme(next.scheme().to_owned()));
    }
    // Names are checked by the resolver when the hop connects; only literals need a look here.
    if !allow_private && check_literal_host(next).is_err() {
        return Err(RedirectRefused::Forbidden(
            next.host_str().unwrap_or_default().to_owned(),
        ));
    }
    Ok(())
}

/// The reqwest policy of the other guarded clients: [`check_redirect`] on every hop, and no hop
/// to another origin than the first request's.
pub(super) fn redirect_policy(allow_private: bool) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let checked = check_redirect(attempt.url(), attempt.previous().len(), allow_private)
            .and_then(|()| match attempt.previous().first() {
                Some(first) if first.origin() != attempt.url().origin() => {
                    Err(RedirectRefused::OtherOrigin(origin_text(attempt.url())))
                }
                _ => Ok(()),
            });
        match checked {
            Ok(()) => attempt.follow(),
            Err(refused) => attempt.error(refused),
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    fn located(location: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(LOCATION, HeaderValue::from_str(location).unwrap());
        headers
    }

    fn post(text: &str) -> Hop {
        Hop::first(Method::POST, url(text), true)
    }

    #[test]
    fn redirect_to_a_forbidden_literal_is_refused() {
        let hop = url("http://169.254.169.254/latest/meta-data");
        assert_eq!(
            check_redirect(&hop, 1, false),
            Err(RedirectRefused::Forbidden("169.254.169.254".into()))
        );
        let hop = url("http://[::ffff:127.0.0.1]:8080/");
        assert!(matches!(
            check_redirect(&hop, 1, false),
            Err(RedirectRefused::Forbidden(_))
        ));
        // Allowed when the guard is off (local development).
        assert_eq!(check_redirect(&hop, 1, true), Ok(()));
    }

    #[test]
    fn redirect_to_a_public_host_is_followed_up_to_five_hops() {
        let hop = url("https://api.example.com/next");
        assert_eq!(check_redirect(&hop, 1, false), Ok(()));
        assert_eq!(check_redirect(&hop, 5, false), Ok(()));
        assert_eq!(
            check_redirect(&hop, 6, false),
            Err(RedirectRefused::TooMany)
        );
        let ftp = url("ftp://files.example.com/");
        assert_eq!(
            check_redirect(&ftp, 1, false),
            Err(RedirectRefused::Scheme("ftp".into()))
        );
    }

    #[test]
    fn each_redirect_status_keeps_or_drops_the_method_body_and_headers() {
        let origin = url("https://api.example.com/a");
        // (status, Location, method after, body after, same origin after)
        let table: &[(u16, &str, Method, bool, bool)] = &[
            (307, "/b", Method::POST, true, true),
            (
                308,
                "https://api.example.com:443/b",
                Method::POST,
                true,
                true,
            ),
            (301, "/b", Method::GET, false, true),
            (
                302,
                "https://other.example.com/b",
                Method::GET,
                false,
                false,
            ),
            (303, "http://api.example.com/b", Method::GET, false, false),
            (
                303,
                "https://api.example.com:8443/b",
                Method::GET,
                false,
                false,
            ),
        ];
        for (status, location, method, with_body, same_origin) in table {
            let status = StatusCode::from_u16(*status).unwrap();
            let next = next_hop(
                &origin,
                &post(origin.as_str()),
                status,
                &located(location),
                false,
            );
            let Next::Follow(hop) = next else {
                panic!("{status} to {location}: {next:?}");
            };
            assert_eq!(
                (&hop.method, hop.with_body, hop.same_origin, hop.requested),
                (method, *with_body, *same_origin, 2),
                "{status} to {location}"
            );
        }
    }

    #[test]
    fn a_body_is_never_redirected_to_another_origin() {
        let origin = url("https://api.example.com/a");
        for status in [307, 308] {
            let next = next_hop(
                &origin,
                &post(origin.as_str()),
                StatusCode::from_u16(status).unwrap(),
                &located("https://collector.example.net/x?token=1"),
                false,
            );
            assert_eq!(
                next,
                Next::Refused(RedirectRefused::BodyToOtherOrigin {
                    status,
                    origin: "https://collector.example.net:443".into()
                })
            );
        }
        // Without a body there is nothing to resend: followed, without the tool's headers.
        let get = Hop::first(Method::GET, origin.clone(), false);
        let next = next_hop(
            &origin,
            &get,
            StatusCode::TEMPORARY_REDIRECT,
            &located("https://collector.example.net/x"),
            false,
        );
        assert!(matches!(
            next,
            Next::Follow(Hop {
                same_origin: false,
                ..
            })
        ));
    }

    #[test]
    fn headers_go_only_to_the_tools_origin() {
        let mut tool = HeaderMap::new();
        tool.insert("x-api-key", HeaderValue::from_static("k"));
        tool.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let mut hop = post("https://api.example.com/a");
        assert_eq!(hop.headers(&tool), tool);
        hop.with_body = false;
        let headers = hop.headers(&tool);
        assert!(headers.contains_key("x-api-key"));
        assert!(!headers.contains_key(CONTENT_TYPE));
        hop.same_origin = false;
        assert!(hop.headers(&tool).is_empty());
    }

    /// The other guarded clients (MCP servers) follow a redirect within the origin only.
    #[tokio::test]
    async fn the_shared_policy_refuses_another_origin() {
        use wiremock::matchers::path;
        use wiremock::{Mock, MockServer, ResponseTemplate};

        let other = MockServer::start().await;
        let server = MockServer::start().await;
        for (from, to) in [
            ("/same", format!("{}/end", server.uri())),
            ("/away", format!("{}/end", other.uri())),
        ] {
            Mock::given(path(from))
                .respond_with(ResponseTemplate::new(307).insert_header("Location", to))
                .mount(&server)
                .await;
        }
        for s in [&server, &other] {
            Mock::given(path("/end"))
                .respond_with(ResponseTemplate::new(200))
                .mount(s)
                .await;
        }
        let client = super::super::guarded_client_builder(true).build().unwrap();
        let same = client.post(format!("{}/same", server.uri())).send().await;
        assert_eq!(same.unwrap().status(), StatusCode::OK);
        let away = client
            .post(format!("{}/away", server.uri()))
            .header("authorization", "Bearer mcp-token")
            .send()
            .await
            .unwrap_err();
        let refused = super::super::find_source::<RedirectRefused>(&away).unwrap();
        assert_eq!(
            refused,
            &RedirectRefused::OtherOrigin(format!("http://127.0.0.1:{}", other.address().port()))
        );
        assert!(other.received_requests().await.unwrap().is_empty());
    }

    #[test]
    fn a_redirect_without_a_usable_location_is_the_answer() {
        let origin = url("https://api.example.com/a");
        let hop = post(origin.as_str());
        for headers in [HeaderMap::new(), located("http://[::1")] {
            assert_eq!(
                next_hop(&origin, &hop, StatusCode::FOUND, &headers, false),
                Next::Final
            );
        }
        assert_eq!(
            next_hop(&origin, &hop, StatusCode::OK, &located("/b"), false),
            Next::Final
        );
    }
}
