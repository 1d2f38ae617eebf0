//! Tools, agents, secrets and MCP servers: versions, pages, and what is sealed.

use super::*;

on_both_backends!(
    tool_versions_and_soft_delete,
    tool_versions_keep_their_note_and_publisher,
    tool_list_pages_with_a_cursor,
    agents_keep_sensitive_config_sealed_and_write_only,
    default_agent_is_unique,
    an_agent_and_its_numbers_land_together_or_not_at_all,
    secrets_are_sealed_and_listed_by_name,
    mcp_servers_are_sealed_and_shown_without_secrets,
);

async fn tool_versions_and_soft_delete(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let v1 = s
        .put_tool("acme", &tool_def("save_meal", "one"), &Default::default())
        .await
        .unwrap();
    let v2 = s
        .put_tool("acme", &tool_def("save_meal", "two"), &Default::default())
        .await
        .unwrap();
    let v3 = s
        .put_tool("acme", &tool_def("save_meal", "three"), &Default::default())
        .await
        .unwrap();
    assert_eq!((v1.version, v2.version, v3.version), (1, 2, 3));
    assert_eq!(v3.name, "save_meal");
    assert_eq!(v3.definition, tool_def("save_meal", "three"));

    // The same definition again is not a new version (retried PUTs).
    let again = s
        .put_tool("acme", &tool_def("save_meal", "three"), &Default::default())
        .await
        .unwrap();
    assert_eq!(again, v3);

    assert_eq!(
        s.get_tool("acme", "save_meal").await.unwrap(),
        Some(v3.clone())
    );
    assert_eq!(
        s.get_tool_version("acme", "save_meal", 1).await.unwrap(),
        Some(v1.clone())
    );
    assert_eq!(
        s.get_tool_version("acme", "save_meal", 9).await.unwrap(),
        None
    );
    let versions = s.list_tool_versions("acme", "save_meal").await.unwrap();
    assert_eq!(versions, vec![v1.clone(), v2.clone(), v3.clone()]);
    assert_eq!(
        (v3.note.as_deref(), v3.published_by.as_deref()),
        (None, None)
    );

    // Soft delete: no longer current, every version kept for pinned calls.
    assert!(s.delete_tool("acme", "save_meal").await.unwrap());
    assert!(!s.delete_tool("acme", "save_meal").await.unwrap());
    assert_eq!(s.get_tool("acme", "save_meal").await.unwrap(), None);
    assert!(
        s.list_tools("acme", Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(s.current_tools("acme").await.unwrap().is_empty());
    assert_eq!(
        s.get_tool_version("acme", "save_meal", 2).await.unwrap(),
        Some(v2)
    );
    assert_eq!(
        s.list_tool_versions("acme", "save_meal")
            .await
            .unwrap()
            .len(),
        3
    );

    // Putting it again continues the numbering.
    let v4 = s
        .put_tool("acme", &tool_def("save_meal", "one"), &Default::default())
        .await
        .unwrap();
    assert_eq!(v4.version, 4);
    assert_eq!(
        s.get_tool("acme", "save_meal").await.unwrap(),
        Some(v4.clone())
    );
    assert_eq!(s.current_tools("acme").await.unwrap(), vec![v4]);

    for bad in [
        json!({"description": "no name"}),
        json!({"name": "has space"}),
        json!({"name": 5}),
    ] {
        let e = s
            .put_tool("acme", &bad, &Default::default())
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{bad}: {e:?}");
    }
    let e = s
        .put_tool("nope", &tool_def("x", "y"), &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
}

async fn tool_list_pages_with_a_cursor(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    // Put in a scrambled order; the list comes back in name order.
    let mut names: Vec<String> = (0..120)
        .map(|i| format!("tool_{:03}", (i * 7) % 120))
        .collect();
    for n in &names {
        s.put_tool("acme", &tool_def(n, "d"), &Default::default())
            .await
            .unwrap();
    }
    names.sort();
    let mut seen = Vec::new();
    let mut page = Page::first(50);
    let mut sizes = Vec::new();
    loop {
        let got = s.list_tools("acme", page.clone()).await.unwrap();
        sizes.push(got.items.len());
        seen.extend(got.items.into_iter().map(|t| t.name));
        match got.next {
            Some(next) => page = Page::after(50, next),
            None => break,
        }
    }
    assert_eq!(sizes, vec![50, 50, 20]);
    assert_eq!(seen, names);

    // An exact multiple of the page size ends without an empty page.
    let two = s.list_tools("acme", Page::first(60)).await.unwrap();
    let rest = s
        .list_tools("acme", Page::after(60, two.next.unwrap()))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 60);
    assert_eq!(rest.next, None);

    for bad in [
        Page::first(0),
        Page::first(201),
        Page::after(10, "not a cursor!"),
    ] {
        let e = s.list_tools("acme", bad).await.unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    }
    assert_eq!(
        s.list_tools("acme", Page::first(200))
            .await
            .unwrap()
            .items
            .len(),
        120
    );
}

async fn agents_keep_sensitive_config_sealed_and_write_only(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    const SENTINEL: &str = "sk-live-SENTINEL-7f3a";
    let def: AgentDef = serde_json::from_value(json!({
        "name": "booking",
        "instructions": "Book tables.",
        "model": "gpt-realtime",
        "tools": [
            {"tool": "crm_lookup", "config": {"region": "eu"}, "sensitive_config": {"api_key": SENTINEL}},
            {"tool": "end_call", "enabled": false}
        ],
        "handoffs": ["billing"],
        "default": true
    }))
    .unwrap();
    let agent = s.put_agent("acme", &def).await.unwrap();
    assert_eq!(agent.tools.len(), 2);
    assert!(agent.tools[0].sensitive_config_set);
    assert!(!agent.tools[1].sensitive_config_set);
    assert!(!agent.tools[1].enabled);
    assert_eq!(agent.tools[1].config, json!({}));

    let got = s.get_agent("acme", "booking").await.unwrap().unwrap();
    assert_eq!(got, agent);
    assert_eq!(got.model.as_deref(), Some("gpt-realtime"));
    assert_eq!(got.voice, None);
    assert_eq!(got.handoffs, vec!["billing".to_owned()]);
    assert!(got.default);
    // Write-only: nothing the API shows carries the value.
    let shown = serde_json::to_string(&got).unwrap();
    assert!(!shown.contains(SENTINEL), "{shown}");
    assert!(!format!("{def:?}").contains(SENTINEL));
    // Sealed at rest.
    assert_absent(&h, "agent_tools", SENTINEL).await;
    assert_absent(&h, "agent_tools", "api_key").await;

    let secrets = s
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secrets[0].tool, "crm_lookup");
    assert_eq!(secrets[0].config, json!({"region": "eu"}));
    assert_eq!(secrets[0].sensitive_config, json!({"api_key": SENTINEL}));
    assert_eq!(secrets[1].sensitive_config, json!({}));
    assert!(!format!("{secrets:?}").contains(SENTINEL));

    // Absent keeps the stored value; the order of tools may change.
    let keep: AgentDef = serde_json::from_value(json!({
        "name": "booking", "instructions": "Book tables politely.",
        "tools": [{"tool": "end_call"}, {"tool": "crm_lookup", "config": {"region": "us"}}]
    }))
    .unwrap();
    assert_eq!(keep.tools[1].sensitive_config, None);
    let kept = s.put_agent("acme", &keep).await.unwrap();
    assert_eq!(kept.created_at, agent.created_at);
    assert_eq!(kept.tools[0].tool, "end_call");
    assert!(kept.tools[1].sensitive_config_set);
    let secrets = s
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secrets[1].sensitive_config, json!({"api_key": SENTINEL}));
    assert_eq!(secrets[1].config, json!({"region": "us"}));

    // A new value replaces it.
    let replace: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "crm_lookup", "sensitive_config": {"api_key": "sk-new"}}]
    }))
    .unwrap();
    s.put_agent("acme", &replace).await.unwrap();
    let secrets = s
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secrets.len(), 1);
    assert_eq!(secrets[0].sensitive_config, json!({"api_key": "sk-new"}));

    // `null` clears it.
    let clear: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "crm_lookup", "sensitive_config": null}]
    }))
    .unwrap();
    assert_eq!(clear.tools[0].sensitive_config, Some(Value::Null));
    let cleared = s.put_agent("acme", &clear).await.unwrap();
    assert!(!cleared.tools[0].sensitive_config_set);
    let secrets = s
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secrets[0].sensitive_config, json!({}));

    // A tool dropped from the agent loses its config; adding it back starts empty.
    let drop: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "other", "sensitive_config": {"a": 1}}]
    }))
    .unwrap();
    s.put_agent("acme", &drop).await.unwrap();
    let back: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "other"}, {"tool": "crm_lookup"}]
    }))
    .unwrap();
    let back = s.put_agent("acme", &back).await.unwrap();
    assert!(back.tools[0].sensitive_config_set);
    assert!(!back.tools[1].sensitive_config_set);

    let dup: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "a"}, {"tool": "a"}]
    }))
    .unwrap();
    let e = s.put_agent("acme", &dup).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let bad: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "a", "sensitive_config": "plain string"}]
    }))
    .unwrap();
    let e = s.put_agent("acme", &bad).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let e = s
        .put_agent(
            "nope",
            &serde_json::from_value(json!({"name": "x"})).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");

    let listed = s.list_agents("acme", Page::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].tools.len(), 2);

    assert!(s.delete_agent("acme", "booking").await.unwrap());
    assert!(!s.delete_agent("acme", "booking").await.unwrap());
    assert_eq!(s.get_agent("acme", "booking").await.unwrap(), None);
    assert_eq!(
        s.agent_tools_with_secrets("acme", "booking").await.unwrap(),
        None
    );
    assert!(raw_cells(&h, "agent_tools").await.is_empty());
}

/// The console saves an agent and the tenant's numbers routed to it in one transaction, on
/// the tenant as it was read: a tenant changed meanwhile (`PUT /v1/features`) is a conflict
/// and neither is written.
async fn an_agent_and_its_numbers_land_together_or_not_at_all(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let read = s.get_tenant("acme").await.unwrap().unwrap();
    let def = |instructions: &str| -> AgentDef {
        serde_json::from_value(json!({"name": "front", "instructions": instructions})).unwrap()
    };
    let routed = json!({"realtime": {"phone_numbers": {"+18005550100": "front"}}});
    s.put_agent_routed("acme", &def("one"), Some((&routed, &read.updated_at)))
        .await
        .unwrap();
    let now = s.get_tenant("acme").await.unwrap().unwrap();
    assert_eq!(now.features, routed);
    assert_eq!(
        s.get_agent("acme", "front")
            .await
            .unwrap()
            .unwrap()
            .instructions,
        "one"
    );

    // Someone else changes the features after the page read them: nothing lands.
    let theirs = json!({"refer": {"enabled": false}});
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    s.set_features("acme", &theirs).await.unwrap();
    let stale = json!({"realtime": {"phone_numbers": {"+18005550199": "front"}}});
    let e = s
        .put_agent_routed("acme", &def("two"), Some((&stale, &now.updated_at)))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");
    assert_eq!(
        s.get_tenant("acme").await.unwrap().unwrap().features,
        theirs
    );
    assert_eq!(
        s.get_agent("acme", "front")
            .await
            .unwrap()
            .unwrap()
            .instructions,
        "one",
        "the agent was saved without its numbers"
    );
}

async fn default_agent_is_unique(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    assert_eq!(s.default_agent("acme").await.unwrap(), None);
    let agent = |name: &str, default: bool| -> AgentDef {
        serde_json::from_value(json!({"name": name, "default": default, "tools": [{"tool": "t"}]}))
            .unwrap()
    };
    s.put_agent("acme", &agent("a", true)).await.unwrap();
    s.put_agent("acme", &agent("b", false)).await.unwrap();
    assert_eq!(s.default_agent("acme").await.unwrap().as_deref(), Some("a"));
    s.put_agent("acme", &agent("b", true)).await.unwrap();
    assert_eq!(s.default_agent("acme").await.unwrap().as_deref(), Some("b"));
    assert!(!s.get_agent("acme", "a").await.unwrap().unwrap().default);
    // Saving the default again keeps it the default.
    s.put_agent("acme", &agent("b", true)).await.unwrap();
    assert_eq!(s.default_agent("acme").await.unwrap().as_deref(), Some("b"));

    // Pages of agents carry each agent's own tools.
    for i in 0..5 {
        let def: AgentDef = serde_json::from_value(json!({
            "name": format!("p{i}"), "tools": (0..=i).map(|j| json!({"tool": format!("t{j}")})).collect::<Vec<_>>()
        }))
        .unwrap();
        s.put_agent("acme", &def).await.unwrap();
    }
    let mut page = Page::first(2);
    let mut all = Vec::new();
    loop {
        let got = s.list_agents("acme", page).await.unwrap();
        all.extend(got.items);
        match got.next {
            Some(n) => page = Page::after(2, n),
            None => break,
        }
    }
    let summary: Vec<(String, usize)> = all
        .iter()
        .map(|a| (a.name.clone(), a.tools.len()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("a".to_owned(), 1),
            ("b".to_owned(), 1),
            ("p0".to_owned(), 1),
            ("p1".to_owned(), 2),
            ("p2".to_owned(), 3),
            ("p3".to_owned(), 4),
            ("p4".to_owned(), 5)
        ]
    );
    for a in &all {
        assert_eq!(Some(a.clone()), s.get_agent("acme", &a.name).await.unwrap());
    }
}

async fn secrets_are_sealed_and_listed_by_name(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    const SENTINEL: &str = "sk-proj-SENTINEL-secret-value";
    s.put_secret("acme", "openai_api_key", &SecretString::from(SENTINEL))
        .await
        .unwrap();
    s.put_secret("acme", "webhook.secret", &SecretString::from("whsec_abc"))
        .await
        .unwrap();
    let names = s.secret_names("acme").await.unwrap();
    assert_eq!(
        names.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        vec!["openai_api_key", "webhook.secret"]
    );
    assert!(!serde_json::to_string(&names).unwrap().contains(SENTINEL));
    assert_absent(&h, "secrets", SENTINEL).await;
    assert_absent(&h, "secrets", "whsec_abc").await;

    let got = s
        .get_secret("acme", "openai_api_key")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.expose_secret(), SENTINEL);
    assert!(!format!("{got:?}").contains(SENTINEL));

    // Replacing keeps one row with the new value.
    s.put_secret("acme", "openai_api_key", &SecretString::from("sk-second"))
        .await
        .unwrap();
    let got = s
        .get_secret("acme", "openai_api_key")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.expose_secret(), "sk-second");
    assert_eq!(s.secret_names("acme").await.unwrap().len(), 2);

    assert!(s.delete_secret("acme", "openai_api_key").await.unwrap());
    assert!(!s.delete_secret("acme", "openai_api_key").await.unwrap());
    assert!(
        s.get_secret("acme", "openai_api_key")
            .await
            .unwrap()
            .is_none()
    );

    let e = s
        .put_secret("acme", "bad name", &SecretString::from("x"))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let e = s
        .put_secret("nope", "k", &SecretString::from("value-in-error?"))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
    assert!(!e.to_string().contains("value-in-error?"), "{e}");
}

async fn mcp_servers_are_sealed_and_shown_without_secrets(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    tenant(s, "globex").await;
    let config = McpServerConfig::Http {
        url: "https://mcp.example.com/mcp?token=tok-SENTINEL-url".to_owned(),
        headers: [(
            "Authorization".to_owned(),
            "Bearer tok-SENTINEL-header".to_owned(),
        )]
        .into(),
    };
    let shown = s.put_mcp_server("acme", "crm", &config).await.unwrap();
    assert_eq!(
        (
            shown.transport.as_str(),
            shown.endpoint.as_str(),
            shown.header_names.clone(),
            shown.revision,
            shown.tools.clone()
        ),
        (
            "http",
            "https://mcp.example.com",
            vec!["Authorization".to_owned()],
            1,
            None
        )
    );
    assert_absent(&h, "mcp_servers", "tok-SENTINEL-url").await;
    assert_absent(&h, "mcp_servers", "tok-SENTINEL-header").await;
    assert!(!format!("{config:?}").contains("SENTINEL"));
    let (opened, revision) = s.mcp_server_config("acme", "crm").await.unwrap().unwrap();
    assert_eq!((opened, revision), (config.clone(), 1));

    // The tool list is kept for the revision it was listed at; a change of the server drops it.
    let tools = json!([{"name": "lookup", "input_schema": {"type": "object"}, "read_only": true}]);
    s.set_mcp_server_tools("acme", "crm", 1, &tools)
        .await
        .unwrap();
    assert_eq!(
        s.get_mcp_server("acme", "crm")
            .await
            .unwrap()
            .unwrap()
            .tools,
        Some(tools.clone())
    );
    let again = s.put_mcp_server("acme", "crm", &config).await.unwrap();
    assert_eq!((again.revision, again.tools), (2, None));
    s.set_mcp_server_tools("acme", "crm", 1, &tools)
        .await
        .unwrap();
    assert_eq!(
        s.get_mcp_server("acme", "crm")
            .await
            .unwrap()
            .unwrap()
            .tools,
        None,
        "a stale revision's list is not kept"
    );

    let stdio = McpServerConfig::Stdio {
        command: "mcp-files".to_owned(),
        args: vec![],
        env: [("TOKEN".to_owned(), "x".to_owned())].into(),
    };
    s.put_mcp_server("acme", "files", &stdio).await.unwrap();
    let page = s.list_mcp_servers("acme", Page::first(1)).await.unwrap();
    assert_eq!(page.items[0].label, "crm");
    let page = s
        .list_mcp_servers(
            "acme",
            Page {
                limit: 1,
                after: page.next,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (
            page.items[0].label.as_str(),
            page.items[0].header_names.clone(),
            page.next
        ),
        ("files", vec!["TOKEN".to_owned()], None)
    );

    // Another tenant sees nothing; a bad label is refused.
    assert!(s.get_mcp_server("globex", "crm").await.unwrap().is_none());
    assert!(
        s.mcp_server_config("globex", "crm")
            .await
            .unwrap()
            .is_none()
    );
    assert!(!s.delete_mcp_server("globex", "crm").await.unwrap());
    let e = s
        .put_mcp_server("acme", "no/slash", &config)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    assert!(s.delete_mcp_server("acme", "crm").await.unwrap());
    assert!(s.get_mcp_server("acme", "crm").await.unwrap().is_none());
}

async fn tool_versions_keep_their_note_and_publisher(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let publish = switchboard_store::Publish {
        note: Some("  shorter reply \u{e9}  ".to_owned()),
        by: Some("key k_1".to_owned()),
    };
    let v1 = s
        .put_tool("acme", &tool_def("save_meal", "one"), &publish)
        .await
        .unwrap();
    assert_eq!(v1.note.as_deref(), Some("shorter reply \u{e9}"));
    assert_eq!(v1.published_by.as_deref(), Some("key k_1"));
    // Read back as written, from each read path.
    assert_eq!(
        s.get_tool_version("acme", "save_meal", 1).await.unwrap(),
        Some(v1.clone())
    );
    assert_eq!(
        s.get_tool("acme", "save_meal").await.unwrap(),
        Some(v1.clone())
    );
    // A blank note is no note.
    let blank = switchboard_store::Publish {
        note: Some("   ".to_owned()),
        by: None,
    };
    let v2 = s
        .put_tool("acme", &tool_def("save_meal", "two"), &blank)
        .await
        .unwrap();
    assert_eq!(v2.note, None);
    // A note past the limit is refused, naming the limit, and stores nothing.
    let long = switchboard_store::Publish {
        note: Some("x".repeat(switchboard_store::MAX_NOTE_CHARS + 1)),
        by: None,
    };
    let e = s
        .put_tool("acme", &tool_def("save_meal", "three"), &long)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("500"), "{e}");
    assert_eq!(
        s.list_tool_versions("acme", "save_meal")
            .await
            .unwrap()
            .len(),
        2
    );
}
