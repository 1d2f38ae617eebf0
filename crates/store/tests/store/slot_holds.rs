//! Holds on calendar slots: overlapping holds exclude each other across store handles (nodes),
//! tenants and calendars are apart, a retry takes its own hold again, and an expired hold is
//! taken over.

use switchboard_store::{SlotHold, SlotHoldRequest};

use super::*;

on_both_backends!(
    overlapping_holds_exclude_each_other_until_released,
    one_of_many_racing_holds_across_two_nodes_wins,
    an_expired_hold_is_taken_over,
);

fn hold<'a>(calendar: &'a str, holder: &'a str, from: i64, to: i64) -> SlotHoldRequest<'a> {
    SlotHoldRequest {
        tenant_id: "acme",
        calendar,
        holder,
        starts_at: from,
        ends_at: to,
        ttl_ms: 60_000,
    }
}

async fn overlapping_holds_exclude_each_other_until_released(h: Harness) {
    let s = &h.store;
    assert_eq!(
        s.hold_slot(&hold("cal", "a", 0, 100)).await.unwrap(),
        SlotHold::Held
    );
    // Overlapping: taken; touching: free; a retry of the holder: its own again.
    assert_eq!(
        s.hold_slot(&hold("cal", "b", 50, 150)).await.unwrap(),
        SlotHold::Taken
    );
    assert_eq!(
        s.hold_slot(&hold("cal", "b", 99, 100)).await.unwrap(),
        SlotHold::Taken
    );
    assert_eq!(
        s.hold_slot(&hold("cal", "b", 100, 200)).await.unwrap(),
        SlotHold::Held
    );
    assert_eq!(
        s.hold_slot(&hold("cal", "a", 0, 100)).await.unwrap(),
        SlotHold::Held
    );
    // Another calendar, another tenant: apart.
    assert_eq!(
        s.hold_slot(&hold("other", "c", 0, 100)).await.unwrap(),
        SlotHold::Held
    );
    let mut elsewhere = hold("cal", "d", 0, 100);
    elsewhere.tenant_id = "globex";
    assert_eq!(s.hold_slot(&elsewhere).await.unwrap(), SlotHold::Held);
    // Released: the slot is free for the next booking.
    s.release_slot("acme", "cal", "a").await.unwrap();
    assert_eq!(
        s.hold_slot(&hold("cal", "e", 0, 100)).await.unwrap(),
        SlotHold::Held
    );
    // Bad input is an error, not a hold.
    assert!(s.hold_slot(&hold("cal", "f", 10, 10)).await.is_err());
    let long = "x".repeat(129);
    assert!(s.hold_slot(&hold(&long, "f", 300, 400)).await.is_err());
}

/// Twenty bookings of overlapping times on two store handles over one database (two nodes),
/// all at once: exactly one holds.
async fn one_of_many_racing_holds_across_two_nodes_wins(h: Harness) {
    let other = Store::connect(&h.url, h.key.clone()).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..20_i64 {
        let s = if i % 2 == 0 {
            h.store.clone()
        } else {
            other.clone()
        };
        tasks.push(tokio::spawn(async move {
            let holder = format!("booking-{i}");
            // Starts 0, 10, …, 190 with an hour's length: every pair overlaps.
            let r = hold("cal", &holder, i * 10, i * 10 + 3_600_000);
            s.hold_slot(&r).await.unwrap()
        }));
    }
    let mut held = 0;
    for t in tasks {
        if t.await.unwrap() == SlotHold::Held {
            held += 1;
        }
    }
    assert_eq!(held, 1);
}

async fn an_expired_hold_is_taken_over(h: Harness) {
    let other = Store::connect(&h.url, h.key.clone()).await.unwrap();
    let mut dying = hold("cal", "dead-node", 0, 100);
    dying.ttl_ms = 300;
    assert_eq!(h.store.hold_slot(&dying).await.unwrap(), SlotHold::Held);
    assert_eq!(
        other.hold_slot(&hold("cal", "b", 0, 100)).await.unwrap(),
        SlotHold::Taken
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        other.hold_slot(&hold("cal", "b", 0, 100)).await.unwrap(),
        SlotHold::Held
    );
    assert_eq!(
        h.store
            .hold_slot(&hold("cal", "dead-node", 0, 100))
            .await
            .unwrap(),
        SlotHold::Taken
    );
}
