//! Tools' observed latencies as nodes report them: each node's figure kept per tool and
//! replaced by its next, the cluster's figure weighted by runs, tenants apart, and a deleted
//! tenant's figures gone with it.

use super::*;

on_both_backends!(nodes_figures_combine_per_tool_weighted_by_runs);

async fn nodes_figures_combine_per_tool_weighted_by_runs(h: Harness) {
    let s = &h.store;
    for t in ["acme", "globex"] {
        s.create_tenant(t, t, &json!({})).await.unwrap();
    }
    s.note_tool_latencies(
        "node-a",
        &[
            ("acme".into(), "lookup".into(), 1000, 30),
            ("globex".into(), "lookup".into(), 50, 10),
        ],
    )
    .await
    .unwrap();
    s.note_tool_latencies("node-b", &[("acme".into(), "lookup".into(), 2000, 10)])
        .await
        .unwrap();
    // A node's newer figure replaces its older one.
    s.note_tool_latencies("node-a", &[("acme".into(), "lookup".into(), 1200, 30)])
        .await
        .unwrap();
    // A tenant that does not exist (deleted meanwhile) is skipped, the rest stored.
    s.note_tool_latencies(
        "node-a",
        &[
            ("gone".into(), "lookup".into(), 9, 9),
            ("acme".into(), "book".into(), 400, 5),
        ],
    )
    .await
    .unwrap();
    let figures = s.tool_latencies().await.unwrap();
    assert_eq!(
        figures,
        vec![
            ("acme".to_owned(), "book".to_owned(), 400, 5),
            // (1200 × 30 + 2000 × 10) / 40
            ("acme".to_owned(), "lookup".to_owned(), 1400, 40),
            ("globex".to_owned(), "lookup".to_owned(), 50, 10),
        ]
    );
    assert!(s.delete_tenant("globex").await.unwrap());
    let figures = s.tool_latencies().await.unwrap();
    assert!(figures.iter().all(|(t, ..)| t != "globex"), "{figures:?}");
}
