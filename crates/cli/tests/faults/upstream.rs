//! The upstream the fault suite's tools write to: an order API that honours `Idempotency-Key`
//! as payment and order APIs do (a key seen before gets the first answer, nothing applied
//! again), and keeps when each request of each key arrived: a key sent again with no node
//! killed since its previous request is a write the runtime ran twice.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use serde_json::{Value, json};

/// What the upstream saw of one idempotency key.
#[derive(Debug, Default, Clone)]
pub struct KeySeen {
    /// When each request with the key arrived.
    pub arrivals: Vec<Instant>,
    /// Applied (once): the item ordered.
    pub applied: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    keys: Mutex<HashMap<String, KeySeen>>,
    /// How long an order takes, in milliseconds.
    delay_ms: AtomicU64,
    /// Orders received and not yet answered.
    in_flight: AtomicU64,
}

/// The running upstream; its server stops when dropped.
pub struct Upstream {
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn order(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let item = body["item"].as_str().unwrap_or("").to_owned();
    {
        let mut keys = shared.keys.lock().unwrap();
        keys.entry(key.clone())
            .or_default()
            .arrivals
            .push(Instant::now());
    }
    shared.in_flight.fetch_add(1, Ordering::SeqCst);
    let delay = shared.delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    shared.in_flight.fetch_sub(1, Ordering::SeqCst);
    let mut keys = shared.keys.lock().unwrap();
    let k = keys.entry(key.clone()).or_default();
    if k.applied.is_none() {
        k.applied = Some(item);
    }
    Json(json!({"order_id": key, "item": k.applied}))
}

async fn lookup() -> Json<Value> {
    tokio::time::sleep(Duration::from_millis(15)).await;
    Json(json!({"found": true}))
}

impl Upstream {
    pub async fn start() -> Upstream {
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .route("/orders", post(order))
            .route("/lookup", get(lookup))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Upstream { url, shared, task }
    }

    pub fn set_delay(&self, delay: Duration) {
        self.shared
            .delay_ms
            .store(u64::try_from(delay.as_millis()).unwrap(), Ordering::Relaxed);
    }

    /// Every key seen, with what was seen of it.
    pub fn keys(&self) -> HashMap<String, KeySeen> {
        self.shared.keys.lock().unwrap().clone()
    }

    /// Requests received so far.
    pub fn requests(&self) -> u32 {
        self.shared
            .keys
            .lock()
            .unwrap()
            .values()
            .map(|k| u32::try_from(k.arrivals.len()).unwrap())
            .sum()
    }

    /// Waits until at least `n` orders are under way (received, not yet answered).
    pub async fn wait_in_flight(&self, n: u64, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.shared.in_flight.load(Ordering::SeqCst) < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "fewer than {n} orders under way"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until the upstream has received at least `n` requests.
    pub async fn wait_requests(&self, n: u32, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.requests() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the upstream got {} requests, expected {n}",
                self.requests()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Requests of a key sent again with no kill between it and the one before: a write the
/// runtime ran twice. (After a kill, the node that takes the call over resumes the run and
/// sends the same key again, which is what the key is for.)
pub fn resent_without_kill(keys: &HashMap<String, KeySeen>, kills: &[Instant]) -> u64 {
    let mut twice = 0;
    for (key, seen) in keys {
        for pair in seen.arrivals.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            if !kills.iter().any(|k| *k >= before && *k <= after) {
                eprintln!("idempotency key {key} sent again without a kill in between");
                twice += 1;
            }
        }
    }
    twice
}
