//! The master key, sealed contents, and the database files and URLs the store opens.

use super::*;

on_both_backends!(
    a_wrong_master_key_fails_with_crypto,
    plain_contexts_from_before_sealing_are_read_then_sealed,
);

async fn a_wrong_master_key_fails_with_crypto(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    s.put_secret("acme", "openai", &SecretString::from("sk-1"))
        .await
        .unwrap();
    let def: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "t", "sensitive_config": {"k": "v"}}]
    }))
    .unwrap();
    s.put_agent("acme", &def).await.unwrap();
    let wrong = Store::connect(&h.url, MasterKey::generate()).await.unwrap();
    let e = wrong.get_secret("acme", "openai").await.unwrap_err();
    assert!(matches!(e, StoreError::Crypto), "{e:?}");
    assert!(e.to_string().contains("SWITCHBOARD_MASTER_KEY"), "{e}");
    let e = wrong
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Crypto), "{e:?}");
    // What does not need the key still works.
    assert_eq!(wrong.secret_names("acme").await.unwrap().len(), 1);
    assert!(wrong.get_agent("acme", "booking").await.unwrap().is_some());
    wrong.close().await;
}

#[test]
fn master_key_load_or_create_makes_a_private_file_and_reuses_it() {
    let dir = std::env::temp_dir().join(format!("sb-key-test-{}", unique()));
    let path = dir.join("nested").join("master.key");
    let (key, created) = MasterKey::load_or_create(None, &path).unwrap();
    assert_eq!(created.as_deref(), Some(path.as_path()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (again, created) = MasterKey::load_or_create(None, &path).unwrap();
    assert_eq!(created, None);
    let sealed = switchboard_store::seal(&key, b"x").unwrap();
    assert_eq!(switchboard_store::open(&again, &sealed).unwrap(), b"x");

    // The environment wins over the file, and an empty variable counts as unset.
    let env_key = MasterKey::generate();
    let env_text = env_key.to_base64();
    let (from_env, created) =
        MasterKey::load_or_create(Some(env_text.expose_secret()), &path).unwrap();
    assert_eq!(created, None);
    let sealed = switchboard_store::seal(&env_key, b"y").unwrap();
    assert_eq!(switchboard_store::open(&from_env, &sealed).unwrap(), b"y");
    assert!(matches!(
        switchboard_store::open(&key, &sealed),
        Err(StoreError::Crypto)
    ));
    let (blank, _) = MasterKey::load_or_create(Some("  "), &path).unwrap();
    let sealed = switchboard_store::seal(&key, b"z").unwrap();
    assert_eq!(switchboard_store::open(&blank, &sealed).unwrap(), b"z");

    // A bad key is an error naming the fix, not a new key.
    let e = MasterKey::load_or_create(Some("dG9vIHNob3J0"), &path).unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    std::fs::write(&path, "garbage\n").unwrap();
    assert!(MasterKey::load_or_create(None, &path).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn open_with_a_wrong_key_is_a_crypto_error() {
    let sealed = switchboard_store::seal(&MasterKey::generate(), b"secret").unwrap();
    let e = switchboard_store::open(&MasterKey::generate(), &sealed).unwrap_err();
    assert!(matches!(e, StoreError::Crypto), "{e:?}");
}

#[test]
fn agent_def_tells_absent_from_null_sensitive_config() {
    let def: AgentDef = serde_json::from_value(json!({
        "name": "a",
        "tools": [
            {"tool": "absent"},
            {"tool": "null", "sensitive_config": null},
            {"tool": "set", "sensitive_config": {"k": "v"}, "enabled": false}
        ]
    }))
    .unwrap();
    assert_eq!(def.tools[0].sensitive_config, None);
    assert!(def.tools[0].enabled);
    assert_eq!(def.tools[0].config, json!({}));
    assert_eq!(def.tools[1].sensitive_config, Some(Value::Null));
    assert_eq!(def.tools[2].sensitive_config, Some(json!({"k": "v"})));
    assert!(!def.tools[2].enabled);
    assert!(def.handoffs.is_empty() && !def.default && def.instructions.is_empty());
}

#[tokio::test]
async fn sqlite_urls_and_paths_create_the_file() {
    let dir = std::env::temp_dir().join(format!("sb-url-test-{}", unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("plain.db");
    let s = Store::connect(plain.to_str().unwrap(), MasterKey::generate())
        .await
        .unwrap();
    s.migrate().await.unwrap();
    assert!(plain.exists());
    s.close().await;
    let url = format!("sqlite://{}", dir.join("url.db").display());
    let s = Store::connect(&url, MasterKey::generate()).await.unwrap();
    s.migrate().await.unwrap();
    assert_eq!(s.backend(), Backend::Sqlite);
    s.close().await;
    assert!(dir.join("url.db").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rows written before contexts were sealed hold plain JSON: they are read as they are, and
/// `migrate` seals them.
async fn plain_contexts_from_before_sealing_are_read_then_sealed(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "old_call");
    let ctx = Context::new(&info, json!({"auth_token": "SENTINEL-OLD-TOKEN"}));
    s.create_call("acme", &info, &json!({}), &ctx)
        .await
        .unwrap();
    let plain = serde_json::to_string(&ctx).unwrap();
    let sql = "UPDATE calls SET context = $1 WHERE id = 'old_call'";
    match h.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap();
            sqlx::query(sql)
                .bind(&plain)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&h.url).await.unwrap();
            sqlx::query(sql)
                .bind(&plain)
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }
    let cells = raw_cells(&h, "calls").await;
    assert!(cells.iter().any(|c| contains(c, b"SENTINEL-OLD-TOKEN")));
    assert_eq!(
        s.get_call("acme", "old_call")
            .await
            .unwrap()
            .unwrap()
            .context,
        ctx
    );
    s.migrate().await.unwrap();
    assert_absent(&h, "calls", "SENTINEL-OLD-TOKEN").await;
    assert_eq!(
        s.get_call("acme", "old_call")
            .await
            .unwrap()
            .unwrap()
            .context,
        ctx
    );
    assert_eq!(
        s.seal_call_contexts().await.unwrap(),
        0,
        "nothing left to seal"
    );
    // A sealed context is bound to its row: copied to another call, it does not open.
    let other = call_info("acme", "other_call");
    s.create_call("acme", &other, &json!({}), &Context::new(&other, json!({})))
        .await
        .unwrap();
    let copy = "UPDATE calls SET context = (SELECT context FROM calls WHERE id = 'old_call') WHERE id = 'other_call'";
    match h.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap();
            sqlx::query(copy).execute(&mut conn).await.unwrap();
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&h.url).await.unwrap();
            sqlx::query(copy).execute(&mut conn).await.unwrap();
        }
    }
    let e = s.get_call("acme", "other_call").await.unwrap_err();
    assert!(matches!(e, StoreError::Crypto), "{e:?}");
}
