//! The door itself: the calls it is serving (Realtime calls and GPT-Live sessions alike), their
//! answers' route to each call's driver, and call control (REFER, hang-up) for the executor.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use secrecy::SecretString;
use serde_json::Value;
use switchboard_runtime::{BoxFuture, CallControl, CallSession, Delivery, OutputSink};
use tokio::sync::{mpsc, oneshot};

use crate::api::{Api, ApiError, CallsApi};
use crate::driver::Driver;
use crate::events::AgentProfile;
use crate::line::{self, CallEnd, DriverMsg, DriverOptions};
use crate::live_driver::LiveDriver;
use crate::live_events::{self, LiveStart};

/// A call this door serves.
#[derive(Debug)]
struct Line {
    key: SecretString,
    api: Api,
    tx: mpsc::UnboundedSender<DriverMsg>,
}

/// The Realtime SIP door of one node.
#[derive(Debug)]
pub struct RealtimeDoor {
    api: CallsApi,
    options: DriverOptions,
    lines: Mutex<HashMap<String, Arc<Line>>>,
}

/// A call opened on the door but not yet running: its sink goes to the call session.
#[derive(Debug)]
pub struct Opened {
    call_id: String,
    api: Api,
    rx: mpsc::UnboundedReceiver<DriverMsg>,
    tx: mpsc::UnboundedSender<DriverMsg>,
    key: SecretString,
}

/// What a call is accepted with and what its driver needs for handoffs.
#[derive(Debug, Clone)]
pub struct CallPlan {
    /// The agent the call starts with.
    pub agent: String,
    /// Every agent the call may become, by name.
    pub agents: Arc<HashMap<String, AgentProfile>>,
    /// `model`, `audio` and other accept fields beside the first agent's session (Realtime).
    pub accept_extra: serde_json::Map<String, Value>,
    /// What a GPT-Live session starts with; `Some` for a call GPT-Live answers.
    pub live: Option<LiveStart>,
}

impl CallPlan {
    /// The `session` of `POST /live/sessions/{id}/accept` (a GPT-Live plan), else `None`.
    pub fn live_session(&self) -> Option<Value> {
        let start = self.live.as_ref()?;
        let agent = self.agents.get(&self.agent)?;
        Some(live_events::accept_session(start, agent))
    }

    /// The body of `POST /realtime/calls/{id}/accept`.
    pub fn accept_body(&self) -> Value {
        let mut body = self
            .agents
            .get(&self.agent)
            .map(AgentProfile::session)
            .unwrap_or_else(|| serde_json::json!({"type": "realtime"}));
        if let Value::Object(m) = &mut body {
            for (k, v) in &self.accept_extra {
                m.insert(k.clone(), v.clone());
            }
        }
        body
    }
}

/// Forwards a call's answers to its driver.
#[derive(Debug)]
struct LineSink {
    tx: mpsc::UnboundedSender<DriverMsg>,
}

impl OutputSink for LineSink {
    fn deliver(&self, delivery: Delivery) -> BoxFuture<'_, ()> {
        // A driver that has stopped has no one to tell; the record keeps the answer.
        let _ = self.tx.send(DriverMsg::Delivery(Box::new(delivery)));
        Box::pin(async {})
    }

    fn released(&self) {
        let _ = self.tx.send(DriverMsg::Released);
    }

    fn handed_off(&self, agent: &str) {
        let _ = self.tx.send(DriverMsg::HandedOff(agent.to_owned()));
    }

    fn answered_elsewhere(&self, function_call_id: &str) {
        let _ = self
            .tx
            .send(DriverMsg::AnsweredElsewhere(function_call_id.to_owned()));
    }
}

impl RealtimeDoor {
    pub fn new(api: CallsApi, options: DriverOptions) -> Arc<RealtimeDoor> {
        Arc::new(RealtimeDoor {
            api,
            options,
            lines: Mutex::new(HashMap::new()),
        })
    }

    pub fn api(&self) -> &CallsApi {
        &self.api
    }

    fn lines(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Line>>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a call answered by `api` and returns its output sink (for the call session)
    /// and the handle to run it with. `None` when the door serves this call already (a
    /// repeated webhook).
    pub fn open(
        &self,
        call_id: &str,
        key: SecretString,
        api: Api,
    ) -> Option<(Arc<dyn OutputSink>, Opened)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut lines = self.lines();
        if lines.contains_key(call_id) {
            return None;
        }
        lines.insert(
            call_id.to_owned(),
            Arc::new(Line {
                key: key.clone(),
                api,
                tx: tx.clone(),
            }),
        );
        let sink: Arc<dyn OutputSink> = Arc::new(LineSink { tx: tx.clone() });
        Some((
            sink,
            Opened {
                call_id: call_id.to_owned(),
                api,
                rx,
                tx,
                key,
            },
        ))
    }

    /// Drops a call opened but never run (another node took it, or its session did not start).
    pub fn forget(&self, call_id: &str) {
        self.lines().remove(call_id);
    }

    /// Stops every call's loop (the server shuts down); each hangs up.
    pub fn stop_all(&self) {
        for line in self.lines().values() {
            let _ = line.tx.send(DriverMsg::End);
        }
    }

    /// Whether this door serves the call.
    pub fn serves(&self, call_id: &str) -> bool {
        self.lines().contains_key(call_id)
    }

    /// Calls being served.
    pub fn live(&self) -> usize {
        self.lines().len()
    }

    /// Stops a call's loop and hangs up (the call was ended through the API).
    pub fn stop(&self, call_id: &str) {
        if let Some(line) = self.lines().get(call_id) {
            let _ = line.tx.send(DriverMsg::End);
        }
    }

    /// Accepts the call, attaches to its socket and runs its tool loop until it ends. The line
    /// is removed when this returns; ending the session is the caller's.
    pub async fn run(&self, opened: Opened, plan: CallPlan, session: CallSession) -> CallEnd {
        let call_id = opened.call_id.clone();
        let end = self.run_inner(opened, plan, session, true).await;
        self.lines().remove(&call_id);
        tracing::info!(name: "realtime_call_ended", call_id = %call_id, end = ?end, "realtime_call_ended");
        end
    }

    /// Runs a call accepted earlier by another node, which died: attaches to its socket and
    /// runs its tool loop until it ends (the session's restored runs answer through it).
    pub async fn resume(&self, opened: Opened, plan: CallPlan, session: CallSession) -> CallEnd {
        let call_id = opened.call_id.clone();
        tracing::info!(name: "realtime_call_resumed", call_id = %call_id, agent = %plan.agent, "realtime_call_resumed");
        let end = self.run_inner(opened, plan, session, false).await;
        self.lines().remove(&call_id);
        tracing::info!(name: "realtime_call_ended", call_id = %call_id, end = ?end, "realtime_call_ended");
        end
    }

    async fn run_inner(
        &self,
        opened: Opened,
        plan: CallPlan,
        session: CallSession,
        accept: bool,
    ) -> CallEnd {
        if opened.api == Api::Live {
            return self.run_live(opened, plan, session, accept).await;
        }
        if accept {
            let body = plan.accept_body();
            // Boxed: the call's task would otherwise keep room for the request all call long.
            if let Err(e) = Box::pin(self.api.accept(&opened.key, &opened.call_id, &body)).await {
                tracing::error!(name: "realtime_accept_failed", call_id = %opened.call_id, error = %e, "realtime_accept_failed");
                return CallEnd::NotAccepted;
            }
            tracing::info!(name: "realtime_call_accepted", call_id = %opened.call_id, agent = %plan.agent, "realtime_call_accepted");
            metrics::counter!("switchboard_realtime_calls_total").increment(1);
        }
        Driver::new(
            self.call_line(opened),
            session,
            plan.agent,
            plan.agents,
            !accept,
        )
        .run()
        .await
    }

    async fn run_live(
        &self,
        opened: Opened,
        plan: CallPlan,
        session: CallSession,
        accept: bool,
    ) -> CallEnd {
        if accept {
            let Some(body) = plan.live_session() else {
                tracing::error!(name: "live_accept_failed", call_id = %opened.call_id, error = "the call has no GPT-Live plan", "live_accept_failed");
                return CallEnd::NotAccepted;
            };
            if let Err(e) =
                Box::pin(self.api.accept_live(&opened.key, &opened.call_id, &body)).await
            {
                tracing::error!(name: "live_accept_failed", call_id = %opened.call_id, error = %e, "live_accept_failed");
                return CallEnd::NotAccepted;
            }
            tracing::info!(name: "live_call_accepted", call_id = %opened.call_id, agent = %plan.agent, "live_call_accepted");
            metrics::counter!("switchboard_live_calls_total").increment(1);
        }
        LiveDriver::new(
            self.call_line(opened),
            session,
            plan.agent,
            plan.agents,
            !accept,
        )
        .run()
        .await
    }

    /// The loop's view of an opened call.
    fn call_line(&self, opened: Opened) -> line::Line {
        line::Line::new(
            opened.call_id,
            opened.api,
            opened.key,
            self.api.clone(),
            self.options.clone(),
            opened.rx,
            opened.tx,
        )
    }

    /// Which API answers a call this door serves.
    pub fn api_of(&self, call_id: &str) -> Option<Api> {
        self.lines().get(call_id).map(|l| l.api)
    }

    fn line(&self, call_id: &str) -> Result<Arc<Line>, String> {
        self.lines()
            .get(call_id)
            .cloned()
            .ok_or_else(|| format!("call `{call_id}` is not a live phone call on this node"))
    }
}

impl CallControl for RealtimeDoor {
    fn refer<'a>(
        &'a self,
        call_id: &'a str,
        function_call_id: &'a str,
        target_uri: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let line = self.line(call_id)?;
            match self
                .api
                .refer(line.api, &line.key, call_id, target_uri)
                .await
            {
                Ok(()) => {
                    let _ = line.tx.send(DriverMsg::Transferred {
                        function_call_id: function_call_id.to_owned(),
                    });
                    Ok(())
                }
                Err(e @ ApiError::Status { .. }) if e.is_gone() => {
                    Err(format!("the call has ended: {e}"))
                }
                // What the model reads as the transfer's failure: the status and OpenAI's
                // error code, or that no answer came; never a URL.
                Err(e) => {
                    tracing::warn!(name: "refer_failed", error = %e, "refer_failed");
                    Err(match e {
                        ApiError::Status { status, code, .. } => format!(
                            "the phone API refused the transfer ({status}{})",
                            code.map(|c| format!(" {c}")).unwrap_or_default()
                        ),
                        ApiError::Transport { message, .. } => {
                            format!("the phone API did not take the transfer: {message}")
                        }
                    })
                }
            }
        })
    }

    fn hangup<'a>(
        &'a self,
        call_id: &'a str,
        function_call_id: &'a str,
        goodbye: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let line = self.line(call_id)?;
            let (done, rx) = oneshot::channel();
            line.tx
                .send(DriverMsg::Hangup {
                    goodbye: goodbye.map(str::to_owned),
                    function_call_id: function_call_id.to_owned(),
                    done,
                })
                .map_err(|_| "the call's loop has stopped".to_owned())?;
            // The loop takes the hang-up on at once; it happens after this call's answer.
            match tokio::time::timeout(Duration::from_secs(5), rx).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err("the call's loop has stopped".to_owned()),
                Err(_) => Err("the call's loop did not take the hang-up in time".into()),
            }
        })
    }
}
