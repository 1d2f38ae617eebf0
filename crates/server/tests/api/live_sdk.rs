//! Every request body and sideband event Switchboard sends on a GPT-Live call — accept, reject,
//! refer, hang-up, function call outputs, continuations, commentary, a handoff's
//! `session.update` — checked against the official `openai` Python SDK's own `live` types
//! (`live_sdk_check.py`): valid, and no field the SDK does not declare.

use std::path::Path;
use std::process::Command;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::live::{output, phone};
use crate::phone_support::{CALLER, SECRET, WAIT};
use crate::support::Backend;

/// The interpreter of `target/py-openai`, made by `scripts/py-openai-venv.sh` (once).
fn python() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join("scripts/py-openai-venv.sh"))
        .output()
        .expect("run scripts/py-openai-venv.sh");
    assert!(
        out.status.success(),
        "scripts/py-openai-venv.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if Path::new(&path).is_absolute() {
        path
    } else {
        root.join(path).to_string_lossy().into_owned()
    }
}

#[tokio::test]
async fn every_live_frame_conforms_to_the_official_sdk_types() {
    let phone = phone(Backend::Sqlite).await;
    // Tools (parallel, with filler commentary), a continuation, a handoff.
    let backend = phone.ring_live("live_sdk").await;
    let calls = backend.call_tools(&[
        ("place_order", json!({"item": "pizza"})),
        (
            "save_meal",
            json!({"meal_type": "dinner", "dishes": ["pizza"]}),
        ),
    ]);
    output(&phone.live, "live_sdk", &calls[0]).await;
    assert!(backend.wait_continued(&calls[0], WAIT).await);
    let calls = backend.call_tools(&[("to_billing", json!({}))]);
    assert!(backend.wait_continued(&calls[0], WAIT).await);
    // A transfer.
    let backend = phone.ring_live("live_sdk_xfer").await;
    backend.call_tools(&[("request_transfer", json!({"destination_id": "sales"}))]);
    phone
        .live
        .wait_request("refer", "live_sdk_xfer", WAIT)
        .await
        .expect("REFER");
    // A goodbye and a hang-up.
    let backend = phone.ring_live("live_sdk_bye").await;
    backend.call_tools(&[("hang_up", json!({}))]);
    backend.say("Goodbye!");
    phone
        .live
        .wait_request("hangup", "live_sdk_bye", WAIT)
        .await
        .expect("hang-up");
    // A declined call: its number names an agent that does not exist.
    let (s, body) = phone
        .app
        .put(
            "/v1/phone_numbers/+18005550111",
            &phone.key,
            json!({"agent": "ghost", "api": "live"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    phone
        .live
        .send_incoming(
            &phone.webhook(),
            SECRET,
            "live_sdk_no",
            CALLER,
            "+18005550111",
            false,
        )
        .await
        .expect("webhook");
    let reject = phone
        .live
        .wait_request("reject", "live_sdk_no", WAIT)
        .await
        .expect("declined");
    assert_eq!(reject.body, json!({"status_code": 404}));

    let frames: Vec<Value> = ["live_sdk", "live_sdk_xfer", "live_sdk_bye", "live_sdk_no"]
        .iter()
        .flat_map(|s| phone.live.frames(s))
        .collect();
    let kinds: Vec<&str> = frames.iter().filter_map(|f| f["kind"].as_str()).collect();
    for kind in ["accept", "reject", "refer", "hangup", "client_event"] {
        assert!(kinds.contains(&kind), "no {kind} frame: {kinds:?}");
    }
    let file = std::env::temp_dir().join(format!(
        "switchboard-live-frames-{}.json",
        std::process::id()
    ));
    std::fs::write(&file, serde_json::to_vec(&frames).expect("frames")).expect("write frames");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/api/live_sdk_check.py");
    let out = Command::new(python())
        .arg(script)
        .arg(&file)
        .output()
        .expect("run live_sdk_check.py");
    let _ = std::fs::remove_file(&file);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the official SDK refuses frames:\n{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("0 problem(s)"), "{report}");
    phone.stop().await;
}
