//! Caller memory end to end through the HTTP door: a caller tells the agent something, and the
//! next call from the same number knows it (profile at call start, `recall`, a tenant's own
//! `memory.*` tools); another caller and another tenant know nothing; the API lists and
//! deletes a caller's memory.

use super::*;

const CALLER: &str = "+14155550100";
const CALLER_PATH: &str = "%2B14155550100";

/// A tenant whose default agent remembers callers and loads their profile, with two tools of
/// its own over `memory.create` and `memory.traverse`.
async fn memory_tenant(app: &TestApp, id: &str) -> String {
    let key = app.tenant(id).await;
    let adopt = json!({
        "name": "note_pet",
        "description": "Remember the caller's pet",
        "parameters": [{"name": "pet", "type": "string", "required": true},
                       {"name": "kind", "type": "string", "required": true}],
        "actions": [{"type": "memory.create", "entity": "{{params.pet}}",
                     "content": "the caller's {{params.kind}}",
                     "relations": [], "into": "result.stored"},
                    {"type": "memory.create", "entity": "caller",
                     "content": "has a {{params.kind}} called {{params.pet}}",
                     "relations": [{"relation": "owns", "to": "{{params.pet}}"}]}],
        "on_success": [{"type": "respond", "message": "Noted."}]
    });
    let pets = json!({
        "name": "pets",
        "description": "What the caller owns",
        "parameters": [],
        "actions": [{"type": "memory.traverse", "from": "caller", "relation": "owns", "depth": 2, "into": "result.found"}]
    });
    for tool in [adopt, pets] {
        let (s, body) = app.post("/v1/tools", &key, tool).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    let agent = json!({"instructions": "Help.", "default": true, "tools": [
        {"tool": "toolkit:memory", "config": {"load_profile": true, "profile_max_observations": 5}},
        {"tool": "note_pet"}, {"tool": "pets"}
    ]});
    let (s, body) = app.put("/v1/agents/desk", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    key
}

async fn start(app: &TestApp, key: &str, call_id: &str, from: Option<&str>, user: Value) -> Value {
    let (s, body) = app
        .post(
            "/v1/calls",
            key,
            json!({"call_id": call_id, "from": from, "user": user}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    body
}

async fn end(app: &TestApp, key: &str, call_id: &str) {
    let (s, body) = app.delete(&format!("/v1/calls/{call_id}"), key).await;
    assert!(s.is_success(), "{body}");
}

async fn recall(app: &TestApp, key: &str, call: &str, fc: &str, query: &str) -> Value {
    let r = invoke(app, key, call, fc, "recall", json!({"query": query})).await;
    assert_eq!(r["result"]["ok"], true, "{r}");
    r["result"]["data"].clone()
}

both_backends!(a_returning_caller_is_remembered, |app| {
    let key = memory_tenant(&app, "acme").await;
    let first = start(&app, &key, "c1", Some(CALLER), json!({})).await;
    assert!(first["caller_profile"].is_null(), "a new caller: {first}");
    let tools: Vec<&str> = first["toolset"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"remember") && tools.contains(&"recall"),
        "{tools:?}"
    );
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc1",
        "remember",
        json!({"content": "prefers morning appointments"}),
    )
    .await;
    assert_eq!(r["result"]["ok"], true, "{r}");
    assert_eq!(r["result"]["data"]["entity"], "caller", "{r}");
    // The same function call again is the same answer, stored once.
    let again = invoke(
        &app,
        &key,
        "c1",
        "fc1",
        "remember",
        json!({"content": "prefers morning appointments"}),
    )
    .await;
    assert_eq!(again["result"], r["result"]);
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc2",
        "note_pet",
        json!({"pet": "Max", "kind": "dog"}),
    )
    .await;
    assert_eq!(r["result"]["ok"], true, "{r}");
    end(&app, &key, "c1").await;

    // The next call from the same number: the profile is there before any tool call.
    let second = start(&app, &key, "c2", Some(CALLER), json!({})).await;
    let text = second["caller_profile"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("prefers morning appointments"), "{second}");
    assert!(text.contains("has a dog called Max"), "{second}");
    let (_, view) = app.get("/v1/calls/c2", &key).await;
    assert_eq!(
        view["context"]["workflow"]["caller_profile"]["text"], second["caller_profile"]["text"],
        "{view}"
    );
    let found = recall(&app, &key, "c2", "fc1", "morning appointment").await;
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(
        found["results"][0]["content"],
        "prefers morning appointments"
    );
    assert_eq!(found["results"][0]["call_id"], "c1");
    let r = invoke(&app, &key, "c2", "fc2", "pets", json!({})).await;
    assert_eq!(
        r["result"]["data"]["found"]["entities"][0]["name"], "Max",
        "{r}"
    );
    assert_eq!(
        r["result"]["data"]["found"]["entities"][0]["observations"][0], "the caller's dog",
        "{r}"
    );
    end(&app, &key, "c2").await;

    // Another caller of the same tenant: no profile, nothing recalled.
    let other = start(&app, &key, "c3", Some("+14155550199"), json!({})).await;
    assert!(other["caller_profile"].is_null(), "{other}");
    assert_eq!(
        recall(&app, &key, "c3", "fc1", "morning dog Max").await["count"],
        0
    );
    end(&app, &key, "c3").await;

    // Another tenant, the same number: nothing, through the tools or the API.
    let globex = memory_tenant(&app, "globex").await;
    let g = start(&app, &globex, "g1", Some(CALLER), json!({})).await;
    assert!(g["caller_profile"].is_null(), "{g}");
    assert_eq!(
        recall(&app, &globex, "g1", "fc1", "morning").await["count"],
        0
    );
    assert_eq!(recall(&app, &globex, "g1", "fc2", "").await["count"], 0);
    let path = format!("/v1/memory/callers/{CALLER_PATH}");
    assert_eq!(app.get(&path, &globex).await.0, StatusCode::NOT_FOUND);
    let (s, gone) = app.delete(&path, &globex).await;
    assert_eq!(
        (s, gone["observations"].clone()),
        (StatusCode::OK, json!(0))
    );
    end(&app, &globex, "g1").await;

    // The owning tenant lists everything, then deletes it.
    let (s, listed) = app.get(&path, &key).await;
    assert_eq!(s, StatusCode::OK, "{listed}");
    assert_eq!(listed["caller"], CALLER);
    assert_eq!(
        listed["observations"].as_array().unwrap().len(),
        3,
        "{listed}"
    );
    assert_eq!(
        listed["relations"],
        json!([{"from": "caller", "relation": "owns", "to": "Max"}])
    );
    assert_eq!(app.get(&path, "").await.0, StatusCode::UNAUTHORIZED);
    let (s, gone) = app.delete(&path, &key).await;
    assert_eq!(
        (s, gone["observations"].clone(), gone["relations"].clone()),
        (StatusCode::OK, json!(3), json!(1))
    );
    assert_eq!(app.get(&path, &key).await.0, StatusCode::NOT_FOUND);
    let fresh = start(&app, &key, "c4", Some(CALLER), json!({})).await;
    assert!(fresh["caller_profile"].is_null(), "forgotten: {fresh}");
    end(&app, &key, "c4").await;
});

both_backends!(memory_follows_the_user_id_and_needs_a_caller, |app| {
    let key = memory_tenant(&app, "acme").await;
    start(
        &app,
        &key,
        "u1",
        None,
        json!({"id": "user-7", "auth_token": "tok-secret-1"}),
    )
    .await;
    let r = invoke(
        &app,
        &key,
        "u1",
        "fc1",
        "remember",
        json!({"content": "speaks French"}),
    )
    .await;
    assert_eq!(r["result"]["ok"], true, "{r}");
    end(&app, &key, "u1").await;
    let next = start(&app, &key, "u2", None, json!({"id": "user-7"})).await;
    assert!(
        next["caller_profile"]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("speaks French"),
        "{next}"
    );
    let (s, listed) = app.get("/v1/memory/callers/user-7", &key).await;
    assert_eq!(s, StatusCode::OK, "{listed}");
    assert!(!listed.to_string().contains("tok-secret-1"), "{listed}");
    end(&app, &key, "u2").await;
    // No number and no user id: the model is told why, and the call goes on.
    start(&app, &key, "anon", None, json!({})).await;
    let r = invoke(
        &app,
        &key,
        "anon",
        "fc1",
        "remember",
        json!({"content": "x"}),
    )
    .await;
    assert_eq!(r["result"]["ok"], false, "{r}");
    assert!(r["output"].as_str().unwrap().contains("`from`"), "{r}");
    let r = invoke(&app, &key, "anon", "fc2", "recall", json!({"query": "x"})).await;
    assert_eq!(r["result"]["ok"], false, "{r}");
    end(&app, &key, "anon").await;
    // A caller id that cannot be one is a clear 400.
    let (s, body) = app
        .get(&format!("/v1/memory/callers/{}", "x".repeat(300)), &key)
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("caller"), "{body}");
});

/// A server that keeps two observations per caller: the third `remember` is a clear answer
/// naming the limit, and the call goes on.
async fn a_full_memory_is_a_clear_answer(backend: Backend) {
    let config = switchboard_server::ServerConfig {
        memory: switchboard_store::MemoryLimits {
            max_observations_per_caller: 2,
            ..switchboard_store::MemoryLimits::default()
        },
        ..switchboard_server::ServerConfig::default()
    };
    let app = crate::support::spawn_app_with(backend, config).await;
    let key = memory_tenant(&app, "acme").await;
    start(&app, &key, "c1", Some(CALLER), json!({})).await;
    for (fc, fact) in [("fc1", "one"), ("fc2", "two")] {
        let r = invoke(&app, &key, "c1", fc, "remember", json!({"content": fact})).await;
        assert_eq!(r["result"]["ok"], true, "{r}");
    }
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc3",
        "remember",
        json!({"content": "three"}),
    )
    .await;
    assert_eq!(r["result"]["ok"], false, "{r}");
    let output = r["output"].as_str().unwrap();
    assert!(
        output.contains("max_observations_per_caller = 2"),
        "{output}"
    );
    let found = recall(&app, &key, "c1", "fc4", "one two three").await;
    assert_eq!(found["count"], 2, "{found}");
    end(&app, &key, "c1").await;
    app.stop().await;
}

#[tokio::test]
async fn a_full_memory_is_a_clear_answer_sqlite() {
    a_full_memory_is_a_clear_answer(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_full_memory_is_a_clear_answer_postgres() {
    a_full_memory_is_a_clear_answer(Backend::Postgres).await;
}

/// The Realtime door: a caller with memories is accepted with them in the agent's instructions.
async fn a_phone_call_starts_with_the_profile(backend: Backend) {
    const SECRET: &str = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdGluZy13ZWJob29rcy0xMjM0NTY=";
    const NUMBER: &str = "+18005550100";
    let wait = std::time::Duration::from_secs(5);
    let sim = switchboard_sim::Simulator::start()
        .await
        .expect("simulator");
    sim.set_api_key("sk-tenant-openai");
    let config = switchboard_server::ServerConfig {
        openai: switchboard_realtime::Endpoints::from_api_base(&sim.base_url()),
        ..switchboard_server::ServerConfig::default()
    };
    let app = crate::support::spawn_app_with(backend, config).await;
    let key = memory_tenant(&app, "acme").await;
    let features = json!({"realtime": {"phone_numbers": {NUMBER: "desk"}}});
    assert_eq!(
        app.put("/v1/features", &key, features).await.0,
        StatusCode::OK
    );
    for (name, value) in [
        ("openai_api_key", "sk-tenant-openai"),
        ("openai_webhook_secret", SECRET),
    ] {
        let (s, body) = app
            .put(
                &format!("/v1/secrets/{name}"),
                &key,
                json!({"value": value}),
            )
            .await;
        assert_eq!(s, StatusCode::NO_CONTENT, "{body}");
    }
    // Remembered in an earlier call through the HTTP door.
    start(&app, &key, "h1", Some(CALLER), json!({})).await;
    invoke(
        &app,
        &key,
        "h1",
        "fc1",
        "remember",
        json!({"content": "is hard of hearing; speak slowly"}),
    )
    .await;
    end(&app, &key, "h1").await;
    let webhook = format!("{}/v1/realtime/webhook/acme", app.base);
    for (call_id, from, expect) in [
        ("rtc_known", CALLER, true),
        ("rtc_new", "+14155550111", false),
    ] {
        let status = sim
            .send_incoming_call(&webhook, SECRET, call_id, from, NUMBER)
            .await
            .expect("webhook");
        assert_eq!(status, 200);
        let accept = sim
            .wait_request("accept", call_id, wait)
            .await
            .expect("accepted");
        let instructions = accept.body["instructions"].as_str().unwrap_or_default();
        assert!(instructions.starts_with("Help."), "{instructions}");
        assert_eq!(
            instructions.contains("is hard of hearing; speak slowly"),
            expect,
            "{call_id}: {instructions}"
        );
    }
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    app.stop().await;
}

#[tokio::test]
async fn a_phone_call_starts_with_the_profile_sqlite() {
    a_phone_call_starts_with_the_profile(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_phone_call_starts_with_the_profile_postgres() {
    a_phone_call_starts_with_the_profile(Backend::Postgres).await;
}
