//! `serve`'s Google flags: the deployment's OAuth client and where Google is (a simulator's
//! addresses in tests), read into the server's `GoogleSettings`.

use clap::Args;
use reqwest::Url;
use secrecy::SecretString;
use switchboard_server::state::GoogleSettings;
use switchboard_toolkits::oauth::OAuthProvider;

/// Google Calendar's OAuth2 client; without `--google-client-id`, Google cannot be connected.
#[derive(Debug, Args)]
pub struct GoogleArgs {
    /// The OAuth client id of this deployment (Google Cloud console, "Web application").
    #[arg(long, env = "SWITCHBOARD_GOOGLE_CLIENT_ID")]
    google_client_id: Option<String>,
    /// The OAuth client secret (prefer the environment variable to the flag).
    #[arg(long, env = "SWITCHBOARD_GOOGLE_CLIENT_SECRET", hide_env_values = true)]
    google_client_secret: Option<String>,
    /// The authorization endpoint.
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_AUTH_URL",
        default_value = "https://accounts.google.com/o/oauth2/v2/auth"
    )]
    google_auth_url: String,
    /// The token endpoint.
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_TOKEN_URL",
        default_value = "https://oauth2.googleapis.com/token"
    )]
    google_token_url: String,
    /// The Calendar API base.
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_API_BASE",
        default_value = switchboard_toolkits::google::API_BASE
    )]
    google_api_base: String,
    /// The base URL browsers reach this server at; the OAuth callback registered with Google is
    /// `<public-url>/v1/oauth/callback`. Default: `http://<listen>`.
    #[arg(long, env = "SWITCHBOARD_PUBLIC_URL")]
    public_url: Option<String>,
}

fn url(flag: &str, value: &str) -> Result<Url, String> {
    match Url::parse(value) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(u),
        _ => Err(format!(
            "--{flag} `{value}` is not an http(s) URL; give one like https://example.com/path"
        )),
    }
}

impl GoogleArgs {
    /// The settings, `None` without a client id; every flag checked with a clear error.
    pub fn settings(&self, listen: std::net::SocketAddr) -> Result<Option<GoogleSettings>, String> {
        let Some(client_id) = self.google_client_id.clone().filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let secret = self
            .google_client_secret
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or("--google-client-id needs --google-client-secret (or SWITCHBOARD_GOOGLE_CLIENT_SECRET)")?;
        let public = self
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{listen}"));
        let mut redirect = url("public-url", &public)?;
        redirect.set_path(&format!(
            "{}/v1/oauth/callback",
            redirect.path().trim_end_matches('/')
        ));
        let mut api_base = url("google-api-base", &self.google_api_base)?;
        if !api_base.path().ends_with('/') {
            let p = format!("{}/", api_base.path());
            api_base.set_path(&p);
        }
        Ok(Some(GoogleSettings {
            provider: OAuthProvider {
                client_id,
                client_secret: SecretString::from(secret),
                auth_url: url("google-auth-url", &self.google_auth_url)?,
                token_url: url("google-token-url", &self.google_token_url)?,
                redirect_url: redirect,
                scopes: vec![
                    "https://www.googleapis.com/auth/calendar.events".to_owned(),
                    "https://www.googleapis.com/auth/calendar.readonly".to_owned(),
                ],
            },
            api_base,
        }))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        google: GoogleArgs,
    }

    fn settings(args: &[&str]) -> Result<Option<GoogleSettings>, String> {
        let mut argv = vec!["serve"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .google
            .settings("127.0.0.1:8080".parse().map_err(|_| "addr")?)
    }

    #[test]
    fn google_flags_are_read_and_checked() {
        assert!(settings(&[]).unwrap().is_none(), "no client id: no Google");
        let err = settings(&["--google-client-id", "id"]).unwrap_err();
        assert!(err.contains("--google-client-secret"), "{err}");
        let err = settings(&[
            "--google-client-id",
            "id",
            "--google-client-secret",
            "s",
            "--google-token-url",
            "ftp://x",
        ])
        .unwrap_err();
        assert!(err.contains("--google-token-url `ftp://x`"), "{err}");
        let g = settings(&[
            "--google-client-id",
            "id",
            "--google-client-secret",
            "s",
            "--public-url",
            "https://sb.example.com/base/",
            "--google-api-base",
            "http://127.0.0.1:9/calendar/v3",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            g.provider.redirect_url.as_str(),
            "https://sb.example.com/base/v1/oauth/callback"
        );
        assert_eq!(g.api_base.as_str(), "http://127.0.0.1:9/calendar/v3/");
        assert_eq!(
            g.provider.token_url.as_str(),
            "https://oauth2.googleapis.com/token"
        );
        let local = settings(&["--google-client-id", "id", "--google-client-secret", "s"])
            .unwrap()
            .unwrap();
        assert_eq!(
            local.provider.redirect_url.as_str(),
            "http://127.0.0.1:8080/v1/oauth/callback"
        );
    }
}
