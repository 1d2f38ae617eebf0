//! The transfer toolkit against seed 001: the built function, config problems, resolution.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use switchboard_core::transfer::{
    ConfigProblem, ReferConfig, Resolution, build_refer_function, normalize_target_uri,
    resolve_destination, transfer_idempotency_key,
};

/// The `features.refer` block of seed 001's acme-corp tenant, with the demo's sales URI.
fn acme() -> Value {
    json!({
        "enabled": true,
        "require_confirmation": true,
        "handoff_phrase": "Je vous transfère vers {{label}}",
        "destinations": [
            {
                "destination_id": "sales",
                "label": "Service Commercial",
                "description_for_model": "For sales inquiries and new customer questions",
                "target_uri": "sip:sales@example.com",
                "enabled": true,
                "priority": 10
            },
            {
                "destination_id": "support",
                "label": "Service Technique",
                "description_for_model": "For technical support and troubleshooting",
                "target_uri": "+14155552000",
                "enabled": true,
                "priority": 5
            }
        ]
    })
}

fn parse(value: Value) -> ReferConfig {
    match ReferConfig::parse(&value) {
        Ok(config) => config,
        Err(problems) => panic!("config should parse, got {problems:#?}"),
    }
}

#[test]
fn acme_function_snapshot() {
    let function = build_refer_function(&parse(acme())).unwrap();
    insta::assert_json_snapshot!("acme_request_transfer", function);
}

#[test]
fn acme_function_exact_strings() {
    let function = build_refer_function(&parse(acme())).unwrap();
    assert_eq!(function.name, "request_transfer");
    assert_eq!(
        function.description,
        "Utiliser uniquement APRÈS confirmation explicite de l'appelant. \
         Avant d'appeler l'outil, annoncer: Je vous transfère vers {{label}} \
         (remplacer {{label}} par le libellé du service choisi)."
    );
    let destination_id = &function.parameters["properties"]["destination_id"];
    assert_eq!(destination_id["enum"], json!(["sales", "support"]));
    assert_eq!(
        destination_id["description"],
        "Identifiant du service vers lequel transférer. Valeurs autorisées: sales, support. \
         Détails: sales: Service Commercial — For sales inquiries and new customer questions \
         | support: Service Technique — For technical support and troubleshooting"
    );
    assert!(!function.strict);
}

/// Every case in `data/seed001_refer_cases.json` was produced by seed 001's Python code
/// (`data/seed001_reference.py`); the port must match it byte for byte, key order included.
#[test]
fn matches_seed001_python_reference() {
    let cases: Vec<Value> =
        serde_json::from_str(include_str!("data/seed001_refer_cases.json")).unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let function = build_refer_function(&parse(case["config"].clone()));
        let actual = function.map(
            |f| json!({"name": f.name, "description": f.description, "parameters": f.parameters}),
        );
        let actual = serde_json::to_string_pretty(&actual).unwrap();
        let expected = serde_json::to_string_pretty(&case["expected"]).unwrap();
        assert_eq!(actual, expected, "case {name:?}");
    }
}

#[test]
fn equal_priorities_keep_config_order() {
    let config = parse(json!({"enabled": true, "destinations": [
        {"destination_id": "b", "target_uri": "sip:b@example.com", "priority": 1},
        {"destination_id": "off", "target_uri": "sip:off@example.com", "priority": 99, "enabled": false},
        {"destination_id": "a", "target_uri": "sip:a@example.com", "priority": 1},
        {"destination_id": "top", "target_uri": "sip:top@example.com", "priority": 7},
        {"destination_id": "c", "target_uri": "sip:c@example.com", "priority": 1},
        {"destination_id": "default", "target_uri": "sip:d@example.com"}
    ]}));
    let function = build_refer_function(&config).unwrap();
    assert_eq!(
        function.parameters["properties"]["destination_id"]["enum"],
        json!(["top", "b", "a", "c", "default"])
    );
}

#[test]
fn no_function_without_an_enabled_destination() {
    for (name, config) in [
        (
            "feature disabled",
            json!({"enabled": false, "destinations": [{"destination_id": "s", "target_uri": "sip:s@example.com"}]}),
        ),
        (
            "all disabled",
            json!({"enabled": true, "destinations": [{"destination_id": "s", "target_uri": "sip:s@example.com", "enabled": false}]}),
        ),
        (
            "no destinations",
            json!({"enabled": true, "destinations": []}),
        ),
        ("destinations omitted", json!({"enabled": true})),
    ] {
        assert_eq!(build_refer_function(&parse(config)), None, "{name}");
    }
}

/// One problem per case: `(case, config, pointer, message, fix)`.
#[test]
fn each_problem_kind_is_reported_with_its_pointer() {
    let dest = |extra: Value| {
        let mut d = json!({"destination_id": "sales", "target_uri": "sip:sales@example.com"});
        d.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"enabled": true, "destinations": [d]})
    };
    let too_long_message = format!(
        "destination_id \"{}\" must match ^[a-zA-Z0-9_-]{{1,64}}$",
        "x".repeat(65)
    );
    let cases: Vec<(&str, Value, &str, &str, Option<&str>)> = vec![
        (
            "not an object",
            json!([]),
            "",
            "expected a JSON object, found an array",
            Some("write a JSON object: { \"field\": value, ... }"),
        ),
        (
            "missing enabled",
            json!({"destinations": []}),
            "/enabled",
            "missing required field \"enabled\"",
            Some("add it: true or false"),
        ),
        (
            "unknown field, near miss",
            json!({"enabled": true, "destination": []}),
            "/destination",
            "unknown field \"destination\"",
            Some("did you mean \"destinations\"?"),
        ),
        (
            "unknown field, camelCase",
            json!({"enabled": true, "requireConfirmation": true}),
            "/requireConfirmation",
            "unknown field \"requireConfirmation\"",
            Some("did you mean \"require_confirmation\"?"),
        ),
        (
            "unknown field, nothing close",
            json!({"enabled": true, "colour": "red"}),
            "/colour",
            "unknown field \"colour\"",
            Some(
                "remove it; known fields are: enabled, require_confirmation, handoff_phrase, destinations",
            ),
        ),
        (
            "unknown field in a destination, pointer escaped",
            dest(json!({"target/uri": "x"})),
            "/destinations/0/target~1uri",
            "unknown field \"target/uri\"",
            Some("did you mean \"target_uri\"?"),
        ),
        (
            "enabled as a string",
            json!({"enabled": "yes"}),
            "/enabled",
            "expected a boolean, found a string",
            Some("write true or false, without quotes"),
        ),
        (
            "handoff phrase as a number",
            json!({"enabled": true, "handoff_phrase": 3}),
            "/handoff_phrase",
            "expected a string, found an integer",
            Some("write it as a JSON string, in double quotes"),
        ),
        (
            "destinations as an object",
            json!({"enabled": true, "destinations": {}}),
            "/destinations",
            "expected an array of destinations, found an object",
            None,
        ),
        (
            "destination not an object",
            json!({"enabled": true, "destinations": ["sales"]}),
            "/destinations/0",
            "expected a JSON object, found a string",
            None,
        ),
        (
            "priority as a float",
            dest(json!({"priority": 1.5})),
            "/destinations/0/priority",
            "expected an integer (64-bit signed), found a number",
            Some("write a whole number such as 10, without quotes"),
        ),
        (
            "priority too large",
            dest(json!({"priority": u64::MAX})),
            "/destinations/0/priority",
            "expected an integer (64-bit signed), found an integer above 9223372036854775807",
            None,
        ),
        (
            "destination enabled null",
            dest(json!({"enabled": null})),
            "/destinations/0/enabled",
            "expected a boolean, found null",
            None,
        ),
        (
            "missing target_uri",
            json!({"enabled": true, "destinations": [{"destination_id": "sales"}]}),
            "/destinations/0/target_uri",
            "missing required field \"target_uri\"",
            Some("add it as a string"),
        ),
        (
            "empty destination_id",
            dest(json!({"destination_id": ""})),
            "/destinations/0/destination_id",
            "destination_id is empty",
            Some("give the destination a short id such as \"sales\""),
        ),
        (
            "destination_id with a space",
            dest(json!({"destination_id": "sales team"})),
            "/destinations/0/destination_id",
            "destination_id \"sales team\" must match ^[a-zA-Z0-9_-]{1,64}$",
            Some("use only letters, digits, \"_\" and \"-\", at most 64 characters"),
        ),
        (
            "destination_id too long",
            dest(json!({"destination_id": "x".repeat(65)})),
            "/destinations/0/destination_id",
            &too_long_message,
            None,
        ),
        (
            "http target",
            dest(json!({"target_uri": "https://example.com"})),
            "/destinations/0/target_uri",
            "target_uri \"https://example.com\" is neither a sip:, sips: or tel: URI nor an E.164 number",
            Some(
                "use \"sip:user@host\", \"tel:+14155552000\" or a bare E.164 number such as \"+14155552000\"",
            ),
        ),
        (
            "number without plus",
            dest(json!({"target_uri": "14155552000"})),
            "/destinations/0/target_uri",
            "target_uri \"14155552000\" is neither a sip:, sips: or tel: URI nor an E.164 number",
            None,
        ),
        (
            "number too short",
            dest(json!({"target_uri": "+123456"})),
            "/destinations/0/target_uri",
            "target_uri \"+123456\" is neither a sip:, sips: or tel: URI nor an E.164 number",
            None,
        ),
        (
            "number too long",
            dest(json!({"target_uri": "+1234567890123456"})),
            "/destinations/0/target_uri",
            "target_uri \"+1234567890123456\" is neither a sip:, sips: or tel: URI nor an E.164 number",
            None,
        ),
        (
            "spaced-out number",
            dest(json!({"target_uri": "+1 415 555-2000"})),
            "/destinations/0/target_uri",
            "target_uri \"+1 415 555-2000\" is neither a sip:, sips: or tel: URI nor an E.164 number",
            Some("write the number without separators: \"+14155552000\""),
        ),
        (
            "upper-case scheme",
            dest(json!({"target_uri": "SIP:sales@example.com"})),
            "/destinations/0/target_uri",
            "target_uri \"SIP:sales@example.com\" is neither a sip:, sips: or tel: URI nor an E.164 number",
            Some("write the scheme in lower case: \"sip:sales@example.com\""),
        ),
        (
            "scheme only",
            dest(json!({"target_uri": "sip:"})),
            "/destinations/0/target_uri",
            "target_uri \"sip:\" is neither a sip:, sips: or tel: URI nor an E.164 number",
            None,
        ),
    ];
    for (case, config, pointer, message, fix) in cases {
        let problems = ReferConfig::parse(&config).unwrap_err();
        assert_eq!(problems.len(), 1, "{case}: {problems:#?}");
        assert_eq!(problems[0].pointer, pointer, "{case}");
        assert_eq!(problems[0].message, message, "{case}");
        if let Some(fix) = fix {
            assert_eq!(problems[0].fix.as_deref(), Some(fix), "{case}");
        }
    }
}

#[test]
fn duplicate_ids_point_at_each_repeat() {
    let config = json!({"enabled": true, "destinations": [
        {"destination_id": "sales", "target_uri": "sip:a@example.com"},
        {"destination_id": "support", "target_uri": "sip:b@example.com"},
        {"destination_id": "sales", "target_uri": "sip:c@example.com", "enabled": false},
        {"destination_id": "sales", "target_uri": "sip:d@example.com"}
    ]});
    let problems = ReferConfig::parse(&config).unwrap_err();
    let found: Vec<(&str, &str)> = problems
        .iter()
        .map(|p| (p.pointer.as_str(), p.message.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                "/destinations/2/destination_id",
                "duplicate destination_id \"sales\" (already used by /destinations/0)"
            ),
            (
                "/destinations/3/destination_id",
                "duplicate destination_id \"sales\" (already used by /destinations/0)"
            ),
        ]
    );
}

#[test]
fn every_problem_is_reported_in_one_pass() {
    let config = json!({
        "enabled": "true",
        "requireConfirmation": true,
        "handoff_phrase": null,
        "destinations": [
            {"destination_id": "sales", "label": 7, "target_uri": "sip:sales@example.com", "priorty": 3},
            {"destination_id": "sales", "target_uri": "0033 1 42 00 00 00"},
            {"destination_id": "", "target_uri": "+14155552000", "enabled": "no"},
            {"destination_id": "après-vente", "description_for_model": ["x"]}
        ]
    });
    let problems = ReferConfig::parse(&config).unwrap_err();
    insta::assert_json_snapshot!("refer_config_many_problems", problems);
}

#[test]
fn problems_serialize_for_the_api() {
    let problem = ConfigProblem {
        pointer: "/destinations/1/target_uri".into(),
        message: "bad".into(),
        fix: None,
    };
    assert_eq!(
        serde_json::to_value(&problem).unwrap(),
        json!({"pointer": "/destinations/1/target_uri", "message": "bad"})
    );
    assert_eq!(problem.to_string(), "/destinations/1/target_uri: bad");
}

#[test]
fn parse_agrees_with_serde_on_valid_config() {
    let parsed = parse(acme());
    let deserialized: ReferConfig = serde_json::from_value(acme()).unwrap();
    assert_eq!(parsed, deserialized);
    // Serde alone must not silently accept unknown fields either.
    let mut unknown = acme();
    unknown["destinations"][0]["prio"] = json!(1);
    assert!(serde_json::from_value::<ReferConfig>(unknown).is_err());
}

#[test]
fn defaults_fill_omitted_fields() {
    let config = parse(json!({"enabled": true, "destinations": [
        {"destination_id": "sales", "target_uri": "sip:sales@example.com"}
    ]}));
    assert!(config.require_confirmation);
    assert_eq!(config.handoff_phrase, None);
    let d = &config.destinations[0];
    assert!(d.enabled);
    assert_eq!(d.priority, 0);
    assert_eq!(
        (d.label.as_deref(), d.description_for_model.as_deref()),
        (None, None)
    );
}

#[test]
fn resolution() {
    let mut with_disabled = acme();
    with_disabled["destinations"]
        .as_array_mut()
        .unwrap()
        .push(json!({"destination_id": "legacy", "target_uri": "sip:old@example.com", "enabled": false, "priority": 99}));
    let mut feature_off = acme();
    feature_off["enabled"] = json!(false);
    let mut none_enabled = acme();
    for d in none_enabled["destinations"].as_array_mut().unwrap() {
        d["enabled"] = json!(false);
    }
    let valid = || vec!["sales".to_owned(), "support".to_owned()];
    let cases = [
        (
            "sip target as is",
            acme(),
            "sales",
            Resolution::Target("sip:sales@example.com".into()),
        ),
        (
            "E.164 becomes tel:",
            acme(),
            "support",
            Resolution::Target("tel:+14155552000".into()),
        ),
        (
            "unknown id",
            acme(),
            "billing",
            Resolution::Unknown { valid_ids: valid() },
        ),
        (
            "ids are case-sensitive",
            acme(),
            "Sales",
            Resolution::Unknown { valid_ids: valid() },
        ),
        (
            "disabled destination",
            with_disabled,
            "legacy",
            Resolution::Unknown { valid_ids: valid() },
        ),
        ("feature off", feature_off, "sales", Resolution::Disabled),
        (
            "nothing enabled",
            none_enabled,
            "sales",
            Resolution::Disabled,
        ),
    ];
    for (case, config, id, expected) in cases {
        assert_eq!(resolve_destination(&parse(config), id), expected, "{case}");
    }
}

#[test]
fn target_uri_normalization() {
    for (input, expected) in [
        ("+14155552000", "tel:+14155552000"),
        ("+3314200000", "tel:+3314200000"),
        ("tel:+14155552000", "tel:+14155552000"),
        ("sip:sales@example.com", "sip:sales@example.com"),
        (
            "sips:sales@example.com;transport=tls",
            "sips:sales@example.com;transport=tls",
        ),
    ] {
        assert_eq!(normalize_target_uri(input), expected, "{input}");
    }
}

#[test]
fn idempotency_key_is_per_call_and_target() {
    assert_eq!(
        transfer_idempotency_key("rtc_479a", "tel:+14155552000"),
        "rtc_479a-transfer-tel:+14155552000"
    );
}

#[test]
fn request_transfer_runs_as_a_declarative_tool() {
    use std::sync::Arc;
    use switchboard_core::{
        CallInfo, Context, EffectOutcome, EffectRequest, Limits, RunInput, run_to_end,
    };
    let cfg = Arc::new(ReferConfig::parse(&acme()).unwrap());
    let tool = Arc::new(
        switchboard_core::transfer::request_transfer_tool(&cfg, &Limits::default()).unwrap(),
    );
    assert_eq!(
        tool.function_def(false).parameters,
        build_refer_function(&cfg).unwrap().parameters
    );
    assert_eq!(tool.side_effect(), switchboard_core::SideEffect::Terminal);
    let call = CallInfo {
        id: "rtc_9".into(),
        tenant_id: "acme-corp".into(),
        agent: "a".into(),
        from: None,
        to: None,
        started_at: "2026-01-01T00:00:00Z".into(),
    };
    let ctx = Context::new(&call, json!({}));
    let input = RunInput {
        refer: Some(cfg),
        ..RunInput::new("fc")
    };
    let mut refers = Vec::new();
    let out = run_to_end(
        &tool,
        input,
        r#"{"destination_id": "sales"}"#,
        &ctx,
        |req| {
            if let EffectRequest::Transfer(t) = req {
                refers.push((t.target_uri.clone(), t.idempotency_key.clone()));
            }
            EffectOutcome::Done { value: Value::Null }
        },
    );
    assert!(out.ok(), "{:?}", out.output());
    assert_eq!(
        refers,
        [(
            "sip:sales@example.com".to_owned(),
            "rtc_9-transfer-sip:sales@example.com".to_owned()
        )]
    );
    let wrong = run_to_end(
        &tool,
        RunInput::new("fc2"),
        r#"{"destination_id": "legal"}"#,
        &ctx,
        |_| EffectOutcome::Done { value: Value::Null },
    );
    assert_eq!(wrong.output()["error"], "invalid_arguments");
}

/// acme with `sales` falling back to `support`.
fn acme_with_fallback() -> ReferConfig {
    let mut config = acme();
    config["destinations"][0]["fallback"] = json!("support");
    parse(config)
}

#[test]
fn a_fallback_must_name_another_destination() {
    let mut config = acme();
    config["destinations"][0]["fallback"] = json!("legal");
    config["destinations"][1]["fallback"] = json!("support");
    let problems = ReferConfig::parse(&config).unwrap_err();
    let found: Vec<(&str, &str)> = problems
        .iter()
        .map(|p| (p.pointer.as_str(), p.message.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                "/destinations/0/fallback",
                "fallback \"legal\" is not a destination"
            ),
            (
                "/destinations/1/fallback",
                "destination \"support\" falls back to itself"
            ),
        ]
    );
    assert_eq!(problems[0].fix.as_deref(), Some("use one of: support"));
    assert_eq!(
        switchboard_core::transfer::fallback_target(&acme_with_fallback(), "sales"),
        Some(("support".into(), "tel:+14155552000".into()))
    );
}

/// Runs `request_transfer` to `destination` with the REFERs answered by `outcomes`; the
/// model's output and the REFERs asked for.
fn transfer_run(
    config: ReferConfig,
    destination: &str,
    outcomes: Vec<switchboard_core::EffectOutcome>,
) -> (Value, Vec<String>) {
    use std::sync::Arc;
    use switchboard_core::{CallInfo, Context, EffectRequest, Limits, RunInput, run_to_end};
    let config = Arc::new(config);
    let tool = Arc::new(
        switchboard_core::transfer::request_transfer_tool(&config, &Limits::default()).unwrap(),
    );
    let call = CallInfo {
        id: "rtc_1".into(),
        tenant_id: "acme-corp".into(),
        agent: "main".into(),
        from: None,
        to: None,
        started_at: "2026-11-23T10:00:00Z".into(),
    };
    let ctx = Context::new(&call, json!({}));
    let input = RunInput {
        refer: Some(config),
        ..RunInput::new("fc1")
    };
    let mut outcomes = outcomes.into_iter();
    let mut refers = Vec::new();
    let args = json!({"destination_id": destination}).to_string();
    let outcome = run_to_end(&tool, input, &args, &ctx, |req| {
        if let EffectRequest::Transfer(t) = req {
            refers.push(t.target_uri.clone());
        }
        outcomes.next().expect("an outcome for every REFER")
    });
    (outcome.output(), refers)
}

fn refused(reason: &str) -> switchboard_core::EffectOutcome {
    switchboard_core::EffectOutcome::Failed(switchboard_core::ToolError::new(
        switchboard_core::ErrorCode::CallTransferFailed,
        reason,
    ))
}

fn done() -> switchboard_core::EffectOutcome {
    switchboard_core::EffectOutcome::Done { value: Value::Null }
}

#[test]
fn a_refused_refer_tries_the_destinations_fallback_once() {
    let (out, refers) = transfer_run(
        acme_with_fallback(),
        "sales",
        vec![refused("the phone API refused the transfer (503)"), done()],
    );
    assert_eq!(refers, ["sip:sales@example.com", "tel:+14155552000"]);
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["data"]["destination_id"], "support");
    assert_eq!(
        out["data"]["failed_attempts"],
        json!([{"destination_id": "sales", "target_uri": "sip:sales@example.com",
                "error": "the phone API refused the transfer (503)"}])
    );
}

#[test]
fn when_the_fallback_fails_too_the_model_hears_both_and_nothing_more_is_tried() {
    let (out, refers) = transfer_run(
        acme_with_fallback(),
        "sales",
        vec![
            refused("the phone API refused the transfer (503)"),
            refused("the phone API did not take the transfer: no answer in time"),
        ],
    );
    assert_eq!(refers.len(), 2);
    assert_eq!(out["ok"], false);
    assert_eq!(out["error"], "call_transfer_failed");
    assert_eq!(
        out["details"]["reason"],
        "the phone API did not take the transfer: no answer in time"
    );
    let attempts = out["details"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{out}");
    assert_eq!(attempts[1]["destination_id"], "support");
    assert!(out["message"].as_str().unwrap().contains("sales"), "{out}");
}

#[test]
fn without_a_fallback_a_refused_refer_says_why() {
    let (out, refers) = transfer_run(
        parse(acme()),
        "sales",
        vec![refused("the phone API refused the transfer (486)")],
    );
    assert_eq!(refers, ["sip:sales@example.com"]);
    assert_eq!(out["error"], "call_transfer_failed");
    assert_eq!(
        out["details"]["reason"],
        "the phone API refused the transfer (486)"
    );
}
