//! Email over SMTP (lettre): `send_email` and tenants' `email.send` actions.
//!
//! The server's address is resolved once and checked by the outbound guard, then connected to
//! by that address (TLS still verifies the configured name), so a name cannot be re-pointed
//! between the check and the connection. `security` is `starttls` (default), `tls` (implicit
//! TLS) or `plain`, which only a deployment that allows private networks accepts (loopback
//! tests and local relays). The `Message-ID` comes from the idempotency key, so a retried send
//! carries the same id and receivers can drop the copy. Each tenant has a send rate, counted in
//! the database so that all nodes share it; a retried send (same idempotency key) is not counted
//! twice.

use std::net::SocketAddr;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchboard_core::toolkits::email::{MAX_BODY, MAX_SUBJECT, render};
use switchboard_runtime::effects::{EmailMessage, ToolkitScope};
use switchboard_store::{EmailAdmission, Store};

/// Longest SMTP exchange for one message.
const SEND_TIMEOUT: Duration = Duration::from_secs(20);
/// Most recipients (to + cc) of one message.
const MAX_RECIPIENTS: usize = 20;

/// The email handler of a deployment.
#[derive(Debug)]
pub struct Smtp {
    allow_private: bool,
    /// Where the per-tenant rate is counted (shared by every node on the database).
    store: Store,
    per_minute: u32,
}

impl Smtp {
    /// `per_minute`: messages each tenant may send per minute across every node on `store`'s
    /// database (a burst of as many). `allow_private`: whether loopback and private SMTP
    /// servers, and `plain`, are allowed.
    pub fn new(store: Store, allow_private: bool, per_minute: u32) -> Self {
        Smtp {
            allow_private,
            store,
            per_minute: per_minute.max(1),
        }
    }

    /// Sends one message with the agent tool's settings.
    pub async fn send(
        &self,
        scope: &ToolkitScope<'_>,
        msg: &EmailMessage,
    ) -> Result<Value, String> {
        let cfg = scope.config;
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let host = text(cfg, "smtp_host")
            .ok_or("email is not set up: the config has no smtp_host; the operator must set it")?;
        let port = cfg
            .get("smtp_port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(587);
        let security = text(cfg, "security").unwrap_or_else(|| "starttls".into());
        let from_email = text(cfg, "from_email")
            .ok_or("email is not set up: the config has no from_email; the operator must set it")?;
        let from = Mailbox::new(
            text(cfg, "from_name"),
            from_email.parse().map_err(|_| {
                "the config's from_email is not an email address; the operator must fix it"
                    .to_owned()
            })?,
        );

        let to = mailboxes("to", &msg.to.list())?;
        let cc = match &msg.cc {
            Some(cc) => mailboxes("cc", &cc.list())?,
            None => Vec::new(),
        };
        if to.is_empty() {
            return Err(
                "no recipient: `to` is empty; ask the caller for their email address".into(),
            );
        }
        if to.len() + cc.len() > MAX_RECIPIENTS {
            return Err(format!(
                "too many recipients; send to at most {MAX_RECIPIENTS}"
            ));
        }
        let (subject, body) = content(scope, msg)?;
        if subject.len() > MAX_SUBJECT || body.len() > MAX_BODY {
            return Err(format!(
                "the message is too long (subject at most {MAX_SUBJECT} bytes, body at most {} KiB); shorten it",
                MAX_BODY / 1024
            ));
        }
        self.admit(scope).await?;

        let message_id = message_id(scope.tenant_id, scope.idempotency_key);
        let mut b = Message::builder()
            .from(from)
            .subject(subject)
            .message_id(Some(message_id.clone()));
        for m in &to {
            b = b.to(m.clone());
        }
        for m in &cc {
            b = b.cc(m.clone());
        }
        if let Some(r) = &msg.reply_to {
            b = b.reply_to(mailboxes("reply_to", &[r.as_str()])?.remove(0));
        }
        let email = b
            .header(ContentType::TEXT_PLAIN)
            .body(body)
            .map_err(|e| format!("the message could not be built: {e}"))?;

        let password = text(scope.secrets, "password").unwrap_or_default();
        let relay = Relay {
            host: &host,
            port,
            security: &security,
            credentials: text(scope.secrets, "username").map(|u| (u, password.as_str())),
        };
        transmit(&relay, self.allow_private, email).await?;
        Ok(json!({
            "message_id": message_id,
            "accepted": to.iter().chain(&cc).map(|m| m.email.to_string()).collect::<Vec<_>>(),
        }))
    }

    /// Counts the send against the tenant's rate; a retry of a counted send is free.
    async fn admit(&self, scope: &ToolkitScope<'_>) -> Result<(), String> {
        match self
            .store
            .admit_email(scope.tenant_id, scope.idempotency_key, self.per_minute)
            .await
        {
            Ok(EmailAdmission::Admitted | EmailAdmission::Repeated) => Ok(()),
            Ok(EmailAdmission::Refused { retry_after_s }) => Err(format!(
                "too many emails were sent in the last minute (at most {} a minute); the email was not sent. Try again in {retry_after_s} s, or tell the caller it will come later",
                self.per_minute
            )),
            Err(e) => {
                tracing::warn!(name: "email_rate_unavailable", error = %e, "email_rate_unavailable");
                Err("the email could not be sent now (the send rate could not be checked); try again in a few seconds".into())
            }
        }
    }
}

/// An SMTP server to send through.
#[derive(Clone)]
pub struct Relay<'a> {
    pub host: &'a str,
    pub port: u16,
    /// `starttls`, `tls` (implicit TLS) or `plain` (only where private networks are allowed).
    pub security: &'a str,
    /// The user name and password, if the server asks for them.
    pub credentials: Option<(String, &'a str)>,
}

impl std::fmt::Debug for Relay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("user", &self.credentials.as_ref().map(|(u, _)| u))
            .finish_non_exhaustive()
    }
}

/// Sends a built message through `relay`: its address resolved once and checked by the
/// outbound guard (`allow_private`), then connected to by that address (TLS still verifies the
/// configured name). The error names the server and what went wrong, never the password.
pub async fn transmit(
    relay: &Relay<'_>,
    allow_private: bool,
    email: Message,
) -> Result<(), String> {
    let (host, port) = (relay.host, relay.port);
    let addr = resolve(host, port, allow_private).await?;
    let tls = |host: &str| {
        TlsParameters::new(host.to_owned())
            .map_err(|e| format!("TLS for {host} could not be set up: {e}"))
    };
    let tls = match relay.security {
        "starttls" => Tls::Required(tls(host)?),
        "tls" => Tls::Wrapper(tls(host)?),
        "plain" if allow_private => Tls::None,
        "plain" => {
            return Err("security `plain` is refused on this server (it sends passwords and mail in the clear); the operator must use starttls or tls".into());
        }
        other => {
            return Err(format!(
                "security `{other}` is not known; the operator must use starttls, tls or plain"
            ));
        }
    };
    let mut transport =
        AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(addr.ip().to_string())
            .port(addr.port())
            .tls(tls)
            .hello_name(ClientId::Domain("switchboard.invalid".into()))
            .timeout(Some(SEND_TIMEOUT));
    if let Some((user, password)) = &relay.credentials {
        transport = transport.credentials(Credentials::new(user.clone(), (*password).to_owned()));
    }
    match transport.build().send(email).await {
        Ok(_) => Ok(()),
        Err(e) => Err(smtp_error(host, port, &e)),
    }
}

/// Whether `text` is one email address (`name@domain`, no display name).
pub fn is_address(text: &str) -> bool {
    text.len() <= 254 && text.parse::<lettre::Address>().is_ok()
}

/// A plain-text message from `from` to each of `to`, with its `Message-ID`.
pub fn plain_text(
    from: &str,
    to: &[String],
    subject: &str,
    body: String,
    message_id: String,
) -> Result<Message, String> {
    let address = |a: &str| {
        a.parse::<Mailbox>().map_err(|_| {
            format!(
                "`{}` is not an email address",
                a.chars().take(80).collect::<String>()
            )
        })
    };
    let mut b = Message::builder()
        .from(address(from)?)
        .subject(subject)
        .message_id(Some(message_id));
    for t in to {
        b = b.to(address(t)?);
    }
    b.header(ContentType::TEXT_PLAIN)
        .body(body)
        .map_err(|e| format!("the message could not be built: {e}"))
}

async fn resolve(host: &str, port: u16, allow_private: bool) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| format!("the mail server {host}:{port} could not be found; the operator must check smtp_host"))?
        .collect();
    if !allow_private
        && addrs
            .iter()
            .any(|a| switchboard_runtime::http::is_forbidden_address(a.ip()))
    {
        return Err(format!(
            "the mail server {host}:{port} is on a loopback, private or metadata address, which this server does not call"
        ));
    }
    addrs
        .into_iter()
        .next()
        .ok_or_else(|| format!("the mail server {host}:{port} has no address"))
}

/// The subject and body: the model's own, or rendered from the agent's template.
fn content(scope: &ToolkitScope<'_>, msg: &EmailMessage) -> Result<(String, String), String> {
    let given = |f: &Option<String>| f.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
    let template = msg.template.as_deref().filter(|t| !t.is_empty());
    match (template, given(&msg.subject), given(&msg.body)) {
        (Some(name), None, None) => {
            let r = render(
                scope.config,
                name,
                msg.variables.as_ref(),
                scope.call_id,
                scope.caller,
            )?;
            Ok((r.subject, r.body))
        }
        (Some(_), _, _) => Err(
            "give either a template (with its variables) or a subject and body, not both".into(),
        ),
        (None, Some(subject), Some(body)) => Ok((subject, body)),
        (None, _, _) => Err(
            "the email has no subject or no body: write both, or name one of the agent's templates in `template`".into(),
        ),
    }
}

/// `<sb-…@switchboard>`: the same for every retry of one send, apart per tenant.
fn message_id(tenant: &str, idempotency_key: &str) -> String {
    let digest = Sha256::digest(format!("{tenant}\u{0}email\u{0}{idempotency_key}").as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("<sb-{hex}@switchboard>")
}

fn mailboxes(field: &str, list: &[&str]) -> Result<Vec<Mailbox>, String> {
    list.iter()
        .map(|a| {
            a.trim().parse::<Mailbox>().map_err(|_| {
                format!(
                    "{field}: `{}` is not a valid email address; ask the caller to spell it again",
                    a.chars().take(80).collect::<String>()
                )
            })
        })
        .collect()
}

fn smtp_error(host: &str, port: u16, e: &lettre::transport::smtp::Error) -> String {
    let server = format!("the mail server {host}:{port}");
    if let Some(code) = e.status() {
        let what = if e.is_permanent() {
            "refused the message"
        } else {
            "could not take the message now"
        };
        // The server's reply text can name the refused address: the model can act on it.
        let reply = e
            .to_string()
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect::<String>();
        format!(
            "{server} {what} ({code}): {reply}. If an address was refused, ask the caller to check it"
        )
    } else if e.is_timeout() {
        format!("{server} did not answer in time; the email was not sent")
    } else if e.is_client() {
        // What this side could not do with the server's offer (no sign-in method it shares,
        // most often); lettre's text names it, never the credentials.
        let reason = e
            .to_string()
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect::<String>();
        format!("{server} and this server could not agree ({reason}); the email was not sent")
    } else {
        format!("{server} could not be reached or the connection failed; the email was not sent")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_are_stable_per_send() {
        assert_eq!(message_id("a", "k-1"), message_id("a", "k-1"));
        assert_ne!(message_id("a", "k-1"), message_id("b", "k-1"));
        assert!(message_id("a", "k").starts_with("<sb-"));
    }

    #[test]
    fn a_misheard_address_is_named() {
        let e = mailboxes("to", &["pat at example dot com"]).unwrap_err();
        assert!(
            e.contains("`pat at example dot com` is not a valid email address"),
            "{e}"
        );
    }
}
