//! Text about an MCP server names it by its label and `scheme://host:port`, never by its URL.
//!
//! A registered URL may carry a credential (`?access_token=…`, `https://user:pass@host`), and
//! the text of a transport failure may quote it: reqwest's errors embed the request URL, and a
//! server's error page may echo it. [`Scrubber::scrub`] is the one function every such text
//! passes before it becomes a message, a record or a log line: the server's URL (and any other
//! URL) becomes its origin, and what is secret in it (credentials, path, query, each query
//! value) and the values of its headers or environment are replaced, in whatever form they
//! appear.

use reqwest::Url;
use secrecy::ExposeSecret;

use super::McpTransportSpec;

/// Shorter pieces are not hunted for in text: they would mangle it and guard nothing.
const MIN_SECRET_LEN: usize = 4;
/// Longest detail of a transport failure kept in a message (a server's error page can be long).
const MAX_DETAIL_CHARS: usize = 300;
/// What a secret piece becomes.
const REDACTED: &str = "[redacted]";

/// Scrubs text about one MCP server; made from its registration.
#[derive(Clone)]
pub struct Scrubber {
    /// What may be shown of where the server is: `scheme://host:port`, or a stdio program.
    origin: String,
    /// The server's URL as written and as parsed: replaced by `origin`.
    urls: Vec<String>,
    /// Secret pieces, longest first: replaced by [`REDACTED`].
    secrets: Vec<String>,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scrubber")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl Scrubber {
    /// The scrubber of a server reached through `transport`.
    pub fn new(transport: &McpTransportSpec) -> Scrubber {
        let mut scrubber = Scrubber {
            origin: String::new(),
            urls: Vec::new(),
            secrets: Vec::new(),
        };
        match transport {
            McpTransportSpec::Http { url, headers } => {
                scrubber.origin = Url::parse(url)
                    .map(|u| origin_of(&u))
                    .unwrap_or_else(|_| "the server's URL".to_owned());
                scrubber.add_url(url);
                for (_, value) in headers {
                    scrubber.add_secret(value.expose_secret());
                }
            }
            McpTransportSpec::Stdio { command, env, .. } => {
                scrubber.origin.clone_from(command);
                for (_, value) in env {
                    scrubber.add_secret(value.expose_secret());
                }
            }
        }
        scrubber.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        scrubber.secrets.dedup();
        scrubber.urls.sort_by_key(|s| std::cmp::Reverse(s.len()));
        scrubber.urls.dedup();
        scrubber
    }

    /// `scheme://host:port` of the server (the program, for stdio).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// `text` with the server's URL as its origin, any other URL as its own origin, and every
    /// secret piece replaced.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for url in &self.urls {
            out = out.replace(url.as_str(), &self.origin);
        }
        out = origins_only(&out);
        for secret in &self.secrets {
            out = out.replace(secret.as_str(), REDACTED);
        }
        out
    }

    /// [`Self::scrub`], then only the first line, at most a few hundred characters: the detail
    /// of a failure as a message may quote it.
    pub fn brief(&self, text: &str) -> String {
        let scrubbed = self.scrub(text);
        let line = scrubbed.lines().next().unwrap_or_default();
        if line.chars().count() > MAX_DETAIL_CHARS {
            let cut: String = line.chars().take(MAX_DETAIL_CHARS).collect();
            format!("{cut}…")
        } else {
            line.to_owned()
        }
    }

    fn add_url(&mut self, raw: &str) {
        self.urls.push(raw.to_owned());
        let Ok(url) = Url::parse(raw) else {
            self.add_secret(raw);
            return;
        };
        self.urls.push(url.as_str().to_owned());
        self.add_encoded(url.username());
        if let Some(password) = url.password() {
            self.add_encoded(password);
        }
        let path = url.path();
        if path != "/" {
            self.add_encoded(path);
        }
        if let Some(query) = url.query() {
            self.add_encoded(&format!("{path}?{query}"));
            self.add_encoded(query);
            for pair in query.split('&') {
                self.add_encoded(pair);
                if let Some((_, value)) = pair.split_once('=') {
                    self.add_encoded(value);
                }
            }
        }
        if let Some(fragment) = url.fragment() {
            self.add_encoded(fragment);
        }
    }

    /// A piece as it is in the URL and as it reads decoded.
    fn add_encoded(&mut self, piece: &str) {
        self.add_secret(piece);
        let decoded = percent_decode(piece);
        if decoded != piece {
            self.add_secret(&decoded);
        }
    }

    fn add_secret(&mut self, piece: &str) {
        if piece.len() >= MIN_SECRET_LEN {
            self.secrets.push(piece.to_owned());
        }
    }
}

/// `scheme://host:port` of a URL, the port written even when it is the scheme's default.
pub fn origin_of(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port_or_known_default() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// Every `http(s)://…` in `text` cut down to its origin.
fn origins_only(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = next_url(&lower[at..]) {
        let start = at + found;
        let mut end = text[start..]
            .find(|c: char| c.is_whitespace() || "\"'<>`\\)".contains(c))
            .map_or(text.len(), |n| start + n);
        // Punctuation after a URL belongs to the sentence.
        while end > start && text[..end].ends_with(['.', ',', ';', ':', '!', '?']) {
            end -= 1;
        }
        out.push_str(&text[at..start]);
        match Url::parse(&text[start..end]) {
            Ok(url) if url.host_str().is_some() => out.push_str(&origin_of(&url)),
            _ => out.push_str("<url>"),
        }
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

fn next_url(lower: &str) -> Option<usize> {
    match (lower.find("http://"), lower.find("https://")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `%XX` sequences decoded (and `+` as a space, as forms write it); invalid ones kept.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use secrecy::SecretString;

    use super::*;

    fn http(url: &str, header: &str) -> Scrubber {
        Scrubber::new(&McpTransportSpec::Http {
            url: url.to_owned(),
            headers: vec![("X-Api-Key".to_owned(), SecretString::from(header))],
        })
    }

    #[test]
    fn urls_become_origins_and_secrets_go_in_any_form() {
        let s = http(
            "https://bob:pa%24%24word@mcp.example.com/v1/mcp?access_token=tok-SECRET&x=1",
            "k-very-secret",
        );
        assert_eq!(s.origin(), "https://mcp.example.com:443");
        let cases = [
            (
                "error sending request for url (https://bob:pa%24%24word@mcp.example.com/v1/mcp?access_token=tok-SECRET&x=1)",
                "error sending request for url (https://mcp.example.com:443)",
            ),
            (
                "redirected to HTTP://other.example:8080/login?next=/v1/mcp",
                "redirected to http://other.example:8080",
            ),
            (
                "<h1>Not found: /v1/mcp?access_token=tok-SECRET&amp;x=1</h1>",
                "<h1>Not found: [redacted]?[redacted]&amp;x=1</h1>",
            ),
            (r#"{"token":"tok-SECRET"}"#, r#"{"token":"[redacted]"}"#),
            (
                "user pa$$word said k-very-secret",
                "user [redacted] said [redacted]",
            ),
            ("path was /v1/mcp", "path was [redacted]"),
            ("bad url http://[::1", "bad url <url>"),
            (
                "connect to http://10.0.0.1:8/x?y=z: refused.",
                "connect to http://10.0.0.1:8: refused.",
            ),
            ("nothing to hide", "nothing to hide"),
        ];
        for (text, expected) in cases {
            assert_eq!(s.scrub(text), expected, "for {text}");
        }
    }

    #[test]
    fn briefs_are_one_short_line() {
        let s = http("http://127.0.0.1:9/mcp?t=tok-SECRET", "none");
        let long = format!("HTTP 404: {}\nsecond line", "x".repeat(1000));
        let brief = s.brief(&long);
        assert!(brief.chars().count() <= MAX_DETAIL_CHARS + 1, "{brief}");
        assert!(!brief.contains("second"));
        // Scrubbed before it is cut, so a cut cannot leave half a secret.
        let text = format!("{}tok-SECRET", "y".repeat(MAX_DETAIL_CHARS - 4));
        assert!(!s.brief(&text).contains("tok-"), "{}", s.brief(&text));
        assert_eq!(s.origin(), "http://127.0.0.1:9");
    }

    #[test]
    fn a_transport_shows_only_where_it_goes() {
        let spec = McpTransportSpec::Http {
            url: "https://u:p@mcp.example.com/mcp?access_token=tok-SECRET".into(),
            headers: vec![],
        };
        let shown = format!("{spec:?}");
        assert!(shown.contains("https://mcp.example.com:443"), "{shown}");
        assert!(
            !shown.contains("tok-SECRET") && !shown.contains(".com/mcp"),
            "{shown}"
        );
    }

    #[test]
    fn stdio_servers_hide_their_environment() {
        let s = Scrubber::new(&McpTransportSpec::Stdio {
            command: "crm-mcp".into(),
            args: vec![],
            env: vec![("TOKEN".into(), SecretString::from("t-secret-env"))],
        });
        assert_eq!(
            s.scrub("crm-mcp: bad token t-secret-env"),
            "crm-mcp: bad token [redacted]"
        );
    }
}
