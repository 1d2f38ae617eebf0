//! The Google simulator as Google documents its endpoints: PKCE checked at the code exchange,
//! codes single use, refresh tokens rotated (the old one then `invalid_grant`), 401 on an
//! expired token, client-chosen event ids (base32hex) with 409 on a taken one, and `orderBy`
//! only with `singleEvents`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchboard_sim::google::{CLIENT_ID, CLIENT_SECRET, GoogleSim};

const REDIRECT: &str = "https://app.example.com/v1/oauth/callback";

fn form(pairs: &[(&str, &str)]) -> String {
    let mut u = Url::parse("http://form.invalid/").unwrap();
    u.query_pairs_mut()
        .extend_pairs(pairs)
        .append_pair("client_id", CLIENT_ID)
        .append_pair("client_secret", CLIENT_SECRET);
    u.query().unwrap().to_owned()
}

async fn token(sim: &GoogleSim, pairs: &[(&str, &str)]) -> (StatusCode, Value) {
    let r = reqwest::Client::new()
        .post(sim.token_url())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(pairs))
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

/// The code the consent page hands back for `verifier`'s challenge.
async fn code(sim: &GoogleSim, verifier: &str) -> String {
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let mut url = Url::parse(&sim.auth_url()).unwrap();
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", CLIENT_ID)
        .append_pair("redirect_uri", REDIRECT)
        .append_pair("scope", "https://www.googleapis.com/auth/calendar.events")
        .append_pair("state", "s1")
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FOUND);
    let back = Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    let q: std::collections::HashMap<_, _> = back.query_pairs().into_owned().collect();
    assert_eq!(q["state"], "s1");
    q["code"].clone()
}

#[tokio::test]
async fn oauth_follows_the_documented_flow() {
    let sim = GoogleSim::start().await.unwrap();
    let verifier = "v".repeat(64);
    // A wrong verifier is refused, and the code is spent.
    let c = code(&sim, &verifier).await;
    let (s, e) = token(
        &sim,
        &[
            ("grant_type", "authorization_code"),
            ("code", &c),
            ("code_verifier", "wrong"),
            ("redirect_uri", REDIRECT),
        ],
    )
    .await;
    assert_eq!(
        (s, e["error"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_grant"))
    );
    let c = code(&sim, &verifier).await;
    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", c.as_str()),
        ("code_verifier", verifier.as_str()),
        ("redirect_uri", REDIRECT),
    ];
    let (s, t) = token(&sim, &exchange).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(
        token(&sim, &exchange).await.1["error"],
        "invalid_grant",
        "a code is single use"
    );
    // Refresh rotates: the new refresh token works, the old one no longer does.
    let old = t["refresh_token"].as_str().unwrap();
    let (s, r) = token(
        &sim,
        &[("grant_type", "refresh_token"), ("refresh_token", old)],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let new = r["refresh_token"].as_str().unwrap();
    assert_ne!(new, old);
    assert_eq!(
        token(
            &sim,
            &[("grant_type", "refresh_token"), ("refresh_token", old)]
        )
        .await
        .1["error"],
        "invalid_grant"
    );
    // Bad client credentials.
    let r = reqwest::Client::new()
        .post(sim.token_url())
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=refresh_token&refresh_token=x&client_id=other&client_secret=x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // The Calendar API: bearer checked; ids base32hex and unique; ordering rules.
    let access = token(
        &sim,
        &[("grant_type", "refresh_token"), ("refresh_token", new)],
    )
    .await
    .1["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let api = reqwest::Client::new();
    let events = format!("{}calendars/primary/events", sim.api_base());
    let event = json!({"id": "abc12345", "summary": "x", "start": {"dateTime": "2030-01-07T10:00:00Z"}, "end": {"dateTime": "2030-01-07T10:30:00Z"}});
    let post =
        |body: Value, bearer: String| api.post(&events).bearer_auth(bearer).json(&body).send();
    assert_eq!(
        post(event.clone(), access.clone()).await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        post(event.clone(), access.clone()).await.unwrap().status(),
        StatusCode::CONFLICT
    );
    let mut bad = event.clone();
    bad["id"] = json!("has-UPPER_and_w");
    assert_eq!(
        post(bad, access.clone()).await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
    let r = api
        .get(format!("{events}?orderBy=startTime"))
        .bearer_auth(&access)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = api
        .get(format!(
            "{events}?singleEvents=true&orderBy=startTime&timeMin=2030-01-07T10:29:00Z"
        ))
        .bearer_auth(&access)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap()["items"][0]["id"],
        "abc12345"
    );
    sim.expire_access_tokens();
    let r = api.get(&events).bearer_auth(&access).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(sim.inserts(), 1);
}

/// Events as Google documents them: an `etag` on each that changes with every write;
/// `If-Match` with an older etag on patch or delete is 412 and changes nothing; a deleted event
/// stays as `status: cancelled` (left out of lists unless `showDeleted=true`, answered by
/// `events.get`), and its id cannot be inserted again (409).
#[tokio::test]
async fn events_carry_etags_and_deleted_ones_stay_cancelled() {
    let sim = GoogleSim::start().await.unwrap();
    let verifier = "w".repeat(64);
    let c = code(&sim, &verifier).await;
    let (_, t) = token(
        &sim,
        &[
            ("grant_type", "authorization_code"),
            ("code", &c),
            ("code_verifier", &verifier),
            ("redirect_uri", REDIRECT),
        ],
    )
    .await;
    let access = t["access_token"].as_str().unwrap().to_owned();
    let api = reqwest::Client::new();
    let events = format!("{}calendars/primary/events", sim.api_base());
    let one = format!("{events}/abc12345");
    let event = json!({"id": "abc12345", "summary": "x", "start": {"dateTime": "2030-01-07T10:00:00Z"}, "end": {"dateTime": "2030-01-07T10:30:00Z"}});
    let inserted: Value = api
        .post(&events)
        .bearer_auth(&access)
        .json(&event)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let first = inserted["etag"].as_str().unwrap().to_owned();
    assert!(first.starts_with('"') && first.ends_with('"'), "{inserted}");

    // A patch with the current etag succeeds and changes it; the old one is then refused.
    let moved = json!({"start": {"dateTime": "2030-01-07T11:00:00Z"}, "end": {"dateTime": "2030-01-07T11:30:00Z"}});
    let r = api
        .patch(&one)
        .bearer_auth(&access)
        .header("If-Match", &first)
        .json(&moved)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let second = r.json::<Value>().await.unwrap()["etag"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(second, first);
    let r = api
        .patch(&one)
        .bearer_auth(&access)
        .header("If-Match", &first)
        .json(&json!({"summary": "overwritten"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PRECONDITION_FAILED);
    let r = api
        .delete(&one)
        .bearer_auth(&access)
        .header("If-Match", &first)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PRECONDITION_FAILED);
    assert_eq!(sim.events("primary")[0]["summary"], "x", "nothing changed");

    // Someone edits the event between a read and a write: the write with the read's etag fails.
    sim.edit_after_next_read("primary", "abc12345", json!({"summary": "edited"}));
    let read: Value = api
        .get(&one)
        .bearer_auth(&access)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["summary"], "x");
    let r = api
        .delete(&one)
        .bearer_auth(&access)
        .header("If-Match", read["etag"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PRECONDITION_FAILED);

    // Deleted: kept as cancelled; get answers it; lists only with showDeleted; its id is taken.
    let r = api.delete(&one).bearer_auth(&access).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let r = api.get(&one).bearer_auth(&access).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let gone: Value = r.json().await.unwrap();
    assert_eq!(gone["status"], "cancelled", "{gone}");
    assert_ne!(gone["etag"], json!(second));
    let listed = |q: &'static str| {
        let api = api.clone();
        let url = format!("{events}?{q}");
        let access = access.clone();
        async move {
            api.get(url)
                .bearer_auth(access)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()["items"]
                .as_array()
                .unwrap()
                .len()
        }
    };
    assert_eq!(listed("singleEvents=true").await, 0);
    assert_eq!(listed("singleEvents=true&showDeleted=true").await, 1);
    let r = api
        .post(&events)
        .bearer_auth(&access)
        .json(&event)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "The requested identifier already exists."
    );
}
