//! Built-in toolkits through the HTTP door: the catalogue, enabling a toolkit on an agent
//! (config checked at save, sensitive config write-only), one function per action, and
//! function names that collide refused at save.

use super::*;

fn caldav_entry(url: &str) -> Value {
    json!({
        "tool": "toolkit:caldav",
        "config": {"url": url, "default_event_duration": 45},
        "sensitive_config": {"username": "alice", "password": "pw-very-secret-77"}
    })
}

both_backends!(the_toolkit_catalogue, |app| {
    let key = app.tenant("acme").await;
    let (s, list) = app.get("/v1/toolkits", &key).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["caldav", "google_calendar", "email", "memory"]);
    let (s, google) = app.get("/v1/toolkits/google_calendar", &key).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (
            google["requires_auth"].clone(),
            google["auth_type"].clone(),
            google["auth_config"]["token_url"].clone(),
            google["config_schema"]["required"].clone(),
        ),
        (
            json!(true),
            json!("oauth2"),
            json!("https://oauth2.googleapis.com/token"),
            json!(["calendar_id"])
        )
    );
    let actions: Vec<&str> = google["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "list_events",
            "create_event",
            "check_availability",
            "find_bookings",
            "cancel_event",
            "reschedule_event",
            "find_free_slots"
        ]
    );
    assert_eq!(
        google["actions"][0]["parameters"][0],
        json!({"name": "time_min", "type": "datetime", "required": true,
               "description": "Start of the range, RFC 3339 with an offset (e.g. 2025-12-30T09:00:00Z)"})
    );
    assert!(!google.to_string().contains("secret\""), "{google}");
    assert_eq!(
        app.get("/v1/toolkits/fax", &key).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/v1/toolkits", "").await.0,
        StatusCode::UNAUTHORIZED
    );
});

both_backends!(an_agent_enables_a_toolkit, |app| {
    let key = app.tenant("acme").await;
    // Every problem at its place, the password never echoed.
    let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"tools": [
                {"tool": "toolkit:caldav", "actions": ["list_events", "book_it"],
                 "config": {"default_event_duration": "long", "colour": "red"},
                 "sensitive_config": {"username": 5, "password": "pw-very-secret-77"}},
                {"tool": "toolkit:fax"}
            ]}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_agent");
    let places: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pointer"].as_str().unwrap())
        .collect();
    for place in [
        "/tools/0/actions/1",
        "/tools/0/config",
        "/tools/0/config/default_event_duration",
        "/tools/0/sensitive_config/username",
        "/tools/1/tool",
    ] {
        assert!(places.contains(&place), "{place} in {body}");
    }
    assert!(!body.to_string().contains("pw-very-secret"), "{body}");

    // Enabled with some of its actions: one function per action, the others absent.
    let mut entry = caldav_entry("http://127.0.0.1:9/cal/");
    entry["actions"] = json!(["list_events", "check_availability"]);
    let (s, agent) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"tools": [entry], "default": true}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{agent}");
    assert_eq!(
        agent["tools"][0],
        json!({"tool": "toolkit:caldav", "enabled": true,
               "config": {"url": "http://127.0.0.1:9/cal/", "default_event_duration": 45},
               "sensitive_config_set": true, "actions": ["list_events", "check_availability"]})
    );
    let (_, set) = app
        .get("/v1/agents/desk/toolset?format=openai-chat", &key)
        .await;
    let functions: Vec<&str> = set["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(functions, ["check_availability", "list_events"]);
    assert_eq!(
        set["tools"][1]["function"]["parameters"]["required"],
        json!(["time_min"])
    );
    assert!(!set.to_string().contains("pw-very-secret"));
    // Sensitive config kept when absent on a later save.
    let (s, agent) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"tools": [{"tool": "toolkit:caldav", "config": {"url": "http://127.0.0.1:9/cal/"}}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{agent}");
    assert_eq!(agent["tools"][0]["sensitive_config_set"], true);
    assert!(agent["tools"][0].get("actions").is_none(), "{agent}");

    // Two calendars on one agent both give `list_events`: refused, naming both.
    let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"tools": [caldav_entry("http://127.0.0.1:9/cal/"),
                             {"tool": "toolkit:google_calendar", "config": {"calendar_id": "primary"}}]}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let first = &body["error"]["details"][0];
    assert_eq!(first["pointer"], "/tools/1", "{body}");
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("`list_events`, which `toolkit:caldav` (/tools/0) gives too"),
        "{body}"
    );
    // A tenant's own tool named like an action collides too.
    let own = json!({"name": "send_email", "description": "Mine", "parameters": [],
                     "actions": [{"type": "respond", "message": "sent"}]});
    assert_eq!(
        app.post("/v1/tools", &key, own).await.0,
        StatusCode::CREATED
    );
    let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"tools": [{"tool": "send_email"},
                             {"tool": "toolkit:email", "config": {"smtp_host": "127.0.0.1", "from_email": "desk@example.com"}}]}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["details"][0]["pointer"], "/tools/1");
    // `actions` belongs to toolkits only.
    let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"tools": [{"tool": "send_email", "actions": ["x"]}]}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
});

/// An agent whose calendar is `url`, with `password`.
async fn calendar_agent(app: &TestApp, key: &str, agent: &str, url: &str, password: &str) {
    let (s, body) = app
        .put(
            &format!("/v1/agents/{agent}"),
            key,
            json!({"tools": [{"tool": "toolkit:caldav", "config": {"url": url},
                              "sensitive_config": {"username": "alice", "password": password}}],
                   "default": agent == "desk"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

both_backends!(a_caller_books_through_caldav, |app| {
    let radicale = crate::peers::Radicale::start().await;
    let cal = radicale.calendar("work").await;
    radicale
        .put_event(
            &cal,
            "team-sync",
            "Team sync",
            "20300107T100000Z",
            "20300107T110000Z",
        )
        .await;
    let key = app.tenant("acme").await;
    calendar_agent(&app, &key, "desk", &cal, radicale.password).await;
    let (s, started) = app
        .post(
            "/v1/calls",
            &key,
            json!({"call_id": "c1", "from": "+14155550100"}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{started}");

    // A taken slot: its conflict, and the free slots to offer instead.
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc1",
        "check_availability",
        json!({"date": "2030-01-07T10:00:00Z", "duration_minutes": 30}),
    )
    .await;
    let data = &r["result"]["data"];
    assert_eq!(r["result"]["ok"], true, "{r}");
    assert_eq!(data["available"], false, "{r}");
    assert_eq!(data["conflicts"][0]["title"], "Team sync", "{r}");
    assert_eq!(
        data["next_free_slots"],
        json!([{"start": "2030-01-07T11:00:00Z", "end": "2030-01-07T11:30:00Z"},
               {"start": "2030-01-07T11:30:00Z", "end": "2030-01-07T12:00:00Z"},
               {"start": "2030-01-07T12:00:00Z", "end": "2030-01-07T12:30:00Z"}])
    );
    // The same question in the caller's zone is answered in it.
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc2",
        "check_availability",
        json!({"date": "2030-01-07T09:00:00-05:00"}),
    )
    .await;
    assert_eq!(r["result"]["data"]["available"], true, "{r}");
    assert_eq!(
        r["result"]["data"]["end"], "2030-01-07T09:30:00-05:00",
        "{r}"
    );

    // A free slot is booked once.
    let r = invoke(&app, &key, "c1", "fc3", "create_event",
        json!({"title": "Checkup", "start_time": "2030-01-07T14:00:00Z", "attendees": ["pat@example.com"]})).await;
    let booked = r["result"]["data"].clone();
    assert_eq!(
        (booked["created"].clone(), booked["end"].clone()),
        (json!(true), json!("2030-01-07T14:30:00Z")),
        "{r}"
    );
    // The effect performed again with the same idempotency key finds its event.
    let calendars = switchboard_toolkits::Calendars::new(app.state.store.clone(), true);
    let config = json!({"url": cal});
    let secrets = json!({"username": "alice", "password": radicale.password});
    let scope = switchboard_runtime::effects::ToolkitScope {
        tenant_id: "acme",
        call_id: "c1",
        caller: None,
        config: &config,
        secrets: &secrets,
        idempotency_key: "c1-fc3-0",
    };
    let op = switchboard_runtime::effects::CalendarOp::CreateEvent {
        title: "Checkup".into(),
        start_time: "2030-01-07T14:00:00Z".into(),
        duration_minutes: None,
        attendees: None,
        description: None,
    };
    use switchboard_runtime::effects::Calendar as _;
    let again = calendars.call(&scope, &op).await.unwrap();
    assert_eq!(
        (again["id"].clone(), again["created"].clone()),
        (booked["id"].clone(), json!(false)),
        "{again}"
    );
    // A slot someone else holds is refused with alternatives; nothing is booked.
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc4",
        "create_event",
        json!({"title": "Clash", "start_time": "2030-01-07T10:15:00Z"}),
    )
    .await;
    assert_eq!(r["result"]["ok"], false, "{r}");
    let msg = r["result"]["message"].as_str().unwrap();
    assert!(
        msg.contains("already taken") && msg.contains("2030-01-07T11:00:00Z"),
        "{msg}"
    );
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc5",
        "list_events",
        json!({"time_min": "2030-01-07T00:00:00Z", "time_max": "2030-01-08T00:00:00Z"}),
    )
    .await;
    let titles: Vec<&str> = r["result"]["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Team sync", "Checkup"], "{r}");

    // Wrong credentials and a calendar that is down: clear errors, the call goes on.
    calendar_agent(&app, &key, "wrong", &cal, "not-the-password-99").await;
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "c2", "agent": "wrong"}),
    )
    .await;
    let r = invoke(
        &app,
        &key,
        "c2",
        "fc1",
        "check_availability",
        json!({"date": "2030-01-07T10:00:00Z"}),
    )
    .await;
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("refused the credentials"), "{r}");
    assert!(!r.to_string().contains("not-the-password"), "{r}");
    let closed = format!("http://127.0.0.1:{}/alice/work/", {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    });
    calendar_agent(&app, &key, "down", &closed, "x").await;
    app.post("/v1/calls", &key, json!({"call_id": "c3", "agent": "down"}))
        .await;
    let r = invoke(
        &app,
        &key,
        "c3",
        "fc1",
        "list_events",
        json!({"time_min": "2030-01-07T00:00:00Z"}),
    )
    .await;
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("could not be reached"), "{r}");
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc6",
        "list_events",
        json!({"time_min": "2030-01-07T13:00:00Z", "time_max": "2030-01-07T15:00:00Z"}),
    )
    .await;
    assert_eq!(r["result"]["data"]["events"][0]["title"], "Checkup", "{r}");
});

both_backends!(a_caller_gets_an_email, |app| {
    let smtp = crate::peers::SmtpPeer::start().await;
    let key = app.tenant("acme").await;
    let mailer = |port: u16| {
        json!({"tools": [{"tool": "toolkit:email", "config": {
            "smtp_host": "127.0.0.1", "smtp_port": port, "security": "plain",
            "from_email": "desk@example.com", "from_name": "Front desk"}}]})
    };
    let (s, body) = app.put("/v1/agents/mailer", &key, mailer(smtp.port)).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "m1", "agent": "mailer"}),
    )
    .await;
    let r = invoke(&app, &key, "m1", "fc1", "send_email",
        json!({"to": "pat@example.com", "subject": "Your appointment", "body": "See you at 14:00."})).await;
    assert_eq!(r["result"]["ok"], true, "{r}");
    let id = r["result"]["data"]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(id.starts_with("<sb-"), "{r}");
    let mail = smtp.received();
    assert!(mail.contains("Subject: Your appointment"), "{mail}");
    assert!(mail.contains(&format!("Message-ID: {id}")), "{mail}");
    assert!(mail.contains("See you at 14:00."), "{mail}");

    // A misheard address and a refused one: errors the model can act on.
    let r = invoke(
        &app,
        &key,
        "m1",
        "fc2",
        "send_email",
        json!({"to": "pat at example dot com", "subject": "x", "body": "y"}),
    )
    .await;
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("is not a valid email address"), "{r}");
    let r = invoke(
        &app,
        &key,
        "m1",
        "fc3",
        "send_email",
        json!({"to": "nobody@example.com", "subject": "x", "body": "y"}),
    )
    .await;
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("refused") && msg.contains("550"), "{r}");
    // A mail server that is down.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    app.put("/v1/agents/mailer", &key, mailer(closed)).await;
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "m2", "agent": "mailer"}),
    )
    .await;
    let r = invoke(
        &app,
        &key,
        "m2",
        "fc1",
        "send_email",
        json!({"to": "pat@example.com", "subject": "x", "body": "y"}),
    )
    .await;
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("could not be reached"), "{r}");

    // The per-tenant rate: past it, sends are refused before any connection; a retry of a
    // counted send (the same idempotency key) is not counted again.
    let limited = switchboard_toolkits::smtp::Smtp::new(app.state.store.clone(), true, 1);
    let config = json!({"smtp_host": "127.0.0.1", "smtp_port": smtp.port, "security": "plain", "from_email": "desk@example.com"});
    let secrets = json!({});
    // (A tenant of its own: the sends above counted against acme's rate.)
    let scope = switchboard_runtime::effects::ToolkitScope {
        tenant_id: "acme-rate",
        call_id: "c1",
        caller: None,
        config: &config,
        secrets: &secrets,
        idempotency_key: "m3-fc1-0",
    };
    let message = switchboard_runtime::effects::EmailMessage {
        to: switchboard_runtime::effects::Addresses::One("pat@example.com".into()),
        cc: None,
        subject: Some("a".into()),
        body: Some("b".into()),
        reply_to: None,
        template: None,
        variables: None,
    };
    assert!(limited.send(&scope, &message).await.is_ok());
    assert!(limited.send(&scope, &message).await.is_ok(), "a retry");
    let next = switchboard_runtime::effects::ToolkitScope {
        idempotency_key: "m3-fc2-0",
        ..scope
    };
    let e = limited.send(&next, &message).await.unwrap_err();
    assert!(
        e.contains("too many emails") && e.contains("Try again in"),
        "{e}"
    );
    // Plain SMTP is refused where private networks are.
    let guarded = switchboard_toolkits::smtp::Smtp::new(app.state.store.clone(), false, 10);
    let e = guarded.send(&scope, &message).await.unwrap_err();
    assert!(e.contains("loopback, private or metadata"), "{e}");
});

both_backends!(an_email_template_is_checked_and_rendered, |app| {
    let smtp = crate::peers::SmtpPeer::start().await;
    let key = app.tenant("acme").await;
    let mailer = |body: &str| {
        json!({"tools": [{"tool": "toolkit:email",
            "config": {
                "smtp_host": "127.0.0.1", "smtp_port": smtp.port, "security": "plain",
                "from_email": "desk@example.com",
                "templates": {"confirmation": {
                    "subject": "Your appointment on {{ variables.time }}",
                    "body": body}}}}]})
    };
    // A broken template is refused at save, at its place, with the line, column and a fix.
    let (s, body) = app
        .put(
            "/v1/agents/mailer",
            &key,
            mailer("Hello {{ variables.name }},\nsee you at {{ variables.time }"),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let problem = &body["error"]["details"][0];
    assert_eq!(
        problem["pointer"], "/tools/0/config/templates/confirmation/body",
        "{body}"
    );
    let message = problem["message"].as_str().unwrap_or_default();
    assert!(message.contains("line 2, column 12"), "{body}");
    assert!(problem["fix"].as_str().is_some(), "{body}");
    // So is one that reads what templates may not (the caller's user scope holds tokens).
    let (s, body) = app
        .put(
            "/v1/agents/mailer",
            &key,
            mailer("token {{ user.auth_token }}"),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.to_string()
            .contains("`user` is not available to templates"),
        "{body}"
    );

    let (s, body) = app
        .put(
            "/v1/agents/mailer",
            &key,
            mailer(
                "Hello {{ variables.name }},\nsee you at {{ variables.time }}.\nRef {{ call.id }}",
            ),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "t1", "agent": "mailer"}),
    )
    .await;
    // The model fills in the variables; the mail server receives the rendered message.
    let r = invoke(
        &app,
        &key,
        "t1",
        "fc1",
        "send_email",
        json!({"to": "pat@example.com", "template": "confirmation",
               "variables": {"name": "Pat", "time": "Tuesday 10:00"}}),
    )
    .await;
    assert_eq!(r["result"]["ok"], true, "{r}");
    let mail = smtp.received().replace("\r\n", "\n");
    assert!(
        mail.contains("Subject: Your appointment on Tuesday 10:00"),
        "{mail}"
    );
    assert!(
        mail.contains("Hello Pat,\nsee you at Tuesday 10:00.\nRef t1"),
        "{mail}"
    );

    // A variable left out: an error naming it, which the model can act on; nothing is sent.
    let r = invoke(&app, &key, "t1", "fc2", "send_email",
        json!({"to": "pat@example.com", "template": "confirmation", "variables": {"time": "Tuesday 10:00"}})).await;
    assert_eq!(r["result"]["ok"], false, "{r}");
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("needs the variable `name`") && msg.contains("variables.name"),
        "{r}"
    );
    // An unknown template names the ones there are.
    let r = invoke(
        &app,
        &key,
        "t1",
        "fc3",
        "send_email",
        json!({"to": "pat@example.com", "template": "reminder", "variables": {}}),
    )
    .await;
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("use one of: confirmation"), "{r}");
    // Neither a template nor a subject and body.
    let r = invoke(
        &app,
        &key,
        "t1",
        "fc4",
        "send_email",
        json!({"to": "pat@example.com", "body": "hi"}),
    )
    .await;
    let msg = r["result"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("no subject or no body"), "{r}");
    assert_eq!(smtp.received().matches("Message-ID").count(), 1);
});
