//! One GPT-Live call's sideband loop: the backend model's function calls in, their outputs and
//! one `response.create` per backend turn out.
//!
//! GPT-Live's voice model talks; a backend (Responses) model reasons and calls the tools, and
//! its stream reaches the sideband nested in `response.event`. A function call is read from the
//! nested `response.output_item.done` (lifecycle snapshots carry an empty `output`), handed to
//! the call session once, and answered with `response.item.create`. A backend turn ends with
//! its nested `response.completed`; once it has ended and every call of every ended turn is
//! answered, one `response.create` continues the backend (earlier, OpenAI answers
//! `function_call_outputs_required`). Outputs of a turn share a byte budget; one that would
//! overflow it is cut with a marker that says so. There is no turn control: the voice model
//! decides when to speak, and a barge-in does not cancel delegated work, so every call runs to
//! its answer. Filler speech, the goodbye and async news go as `session.commentary.append`.
//! A dropped sideband is re-attached ([`crate::line`] runs the loop); a `session.closed` ends
//! the call.
//!
//! [`turns`] keeps the backend's turns and says when a continuation is due; [`budget`] keeps
//! outputs within the backend's input budget; [`fillers`] spaces a slow tool's fillers so the
//! caller hears nothing for at most the agent's turn budget.

mod budget;
mod fillers;
mod turns;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_runtime::adaptive;
use switchboard_runtime::{CallSession, Delivery};

use crate::events::AgentProfile;
use crate::line::{CallEnd, Line, LineDriver, Step, owed_continuation};
use crate::live_events::{self, LiveEvent};
use crate::recent::RecentIds;

pub use budget::CUT_MARKER;
use budget::Refusals;
use fillers::{Due, Fillers, STILL_WORKING};
use turns::Turns;

/// How long the voice model must be quiet after the goodbye is placed before hanging up.
const GOODBYE_QUIET: Duration = Duration::from_millis(1_500);

/// A hang-up under way.
struct Goodbye {
    /// The goodbye: it waits for the owed answers ([`Line::owed`]).
    text: Option<String>,
    /// The goodbye went to the voice model (or, without one, the hang-up was made due).
    placed: bool,
    /// When to hang up: set once the goodbye is placed (or, without one, once the owed
    /// answers are out), pushed back while the model talks.
    at: Option<Instant>,
    deadline: Instant,
}

pub(crate) struct LiveDriver {
    line: Line,
    session: CallSession,
    agent: String,
    agents: Arc<HashMap<String, AgentProfile>>,
    turns: Turns,
    started: RecentIds,
    answered: RecentIds,
    refusals: Refusals,
    timers: HashMap<String, Instant>,
    delayed: HashMap<String, String>,
    fillers: Fillers,
    goodbye: Option<Goodbye>,
    seq: u64,
    /// Taken over from a node that died: calls this driver never saw are restored runs of
    /// turns the backend waits on.
    resumed: bool,
}

impl LiveDriver {
    pub(crate) fn new(
        line: Line,
        session: CallSession,
        agent: String,
        agents: Arc<HashMap<String, AgentProfile>>,
        resumed: bool,
    ) -> LiveDriver {
        LiveDriver {
            line,
            session,
            agent,
            agents,
            turns: Turns::default(),
            started: RecentIds::default(),
            answered: RecentIds::default(),
            refusals: Refusals::default(),
            timers: HashMap::new(),
            delayed: HashMap::new(),
            fillers: Fillers::default(),
            goodbye: None,
            seq: 0,
            resumed,
        }
    }

    /// Runs the call until it ends; a taken-over call first adopts the session's restored
    /// runs and the backend's last turn answered before the old owner died.
    pub(crate) async fn run(mut self) -> CallEnd {
        if self.resumed
            && let Some(snapshot) = self.session.snapshot().await
        {
            // Restored runs finished already are adopted too: their answers are on the way.
            for call in snapshot.pending.iter().chain(&snapshot.restored) {
                self.adopt(call.clone());
            }
            // The old owner may have died between the turn's outputs and its continuation:
            // a turn answered just before it died gets one `response.create`, now or with the
            // restored runs' answers (`DriverOptions::continue_within`).
            for record in owed_continuation(&snapshot, self.line.options.continue_within) {
                let call = record.function_call_id.clone();
                self.adopt(call.clone());
                self.answered.insert(&call);
                self.turns.answered(&call);
            }
            self.settle();
        }
        crate::line::run(self).await
    }

    /// A restored run of a call the old owner saw (see [`Turns::adopt`]).
    fn adopt(&mut self, call: String) {
        if self.started.insert(&call) {
            self.turns.adopt(&call);
        }
    }

    fn next_event_id(&mut self) -> String {
        self.seq += 1;
        format!("sb_{}", self.seq)
    }

    fn on_event(&mut self, text: &str) -> Step {
        let ev = match LiveEvent::parse(text) {
            Ok(ev) => ev,
            Err(e) => {
                tracing::warn!(name: "live_event_unreadable", error = %e, "live_event_unreadable");
                return Step::Go;
            }
        };
        match ev.kind.as_str() {
            "response.event" => {
                let key = ev.delegation_id.unwrap_or_default();
                if let Some(live_events::EventField::Backend(inner)) = ev.event {
                    self.on_backend(key, inner);
                }
            }
            "transport.dtmf.received" => {
                let keys = match &ev.event {
                    Some(live_events::EventField::Keys(k)) => Some(k.as_str()),
                    _ => None,
                };
                crate::line::dtmf_received(self.line.api, keys);
            }
            "session.output_transcript.delta" => {
                // The caller hears speech: a later filler waits for it to end.
                self.fillers.transcript();
                // The voice model is still talking: the goodbye is not over yet.
                if let Some(g) = &mut self.goodbye
                    && g.at.is_some()
                {
                    g.at = Some(Instant::now() + GOODBYE_QUIET);
                }
            }
            "session.commentary.appended" => {
                if let Some(g) = &mut self.goodbye
                    && g.at.is_none()
                    && ev
                        .client_event_id
                        .as_deref()
                        .is_some_and(|id| id.starts_with("bye_"))
                {
                    g.at = Some(Instant::now() + GOODBYE_QUIET);
                }
            }
            "session.closed" => {
                let reason = ev.reason.unwrap_or_default();
                tracing::info!(name: "live_session_closed", reason = %reason, "live_session_closed");
                return Step::End(self.line.ended_by_peer());
            }
            "error" => self.on_error(ev.error.unwrap_or_default()),
            _ => {}
        }
        Step::Go
    }

    fn on_backend(&mut self, key: String, ev: live_events::BackendEvent) {
        match ev.kind.as_str() {
            "response.output_item.done" => {
                if let Some(item) = ev.item
                    && item.kind == "function_call"
                    && let (Some(call), Some(name)) = (item.call_id, item.name)
                {
                    self.start_call(key, call, name, item.arguments.unwrap_or_default(), item.id);
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                if ev.kind != "response.completed" {
                    let status = ev.response.and_then(|r| r.status).unwrap_or_default();
                    tracing::warn!(name: "live_backend_turn_unfinished", kind = %ev.kind, status = %status, "live_backend_turn_unfinished");
                }
                // Terminal effects (a transfer, a hang-up) held for the turn may go now.
                if !key.is_empty() {
                    self.session.response_done(&key);
                }
                self.turns.end(&key);
                self.settle();
            }
            _ => {}
        }
    }

    fn on_error(&mut self, e: live_events::LiveError) {
        let code = e.code.clone().unwrap_or_default();
        match code.as_str() {
            "response_input_buffer_full" => {
                metrics::counter!("switchboard_live_outputs_refused_total").increment(1);
                // The refused output's call stays pending at OpenAI: send it again as a marker
                // only, once; the backend learns the result was too long instead of waiting.
                match self.refusals.first_refusal(e.client_event_id.as_deref()) {
                    Some(call) => {
                        tracing::warn!(name: "live_output_refused", call_id = %call, "live_output_refused");
                        let id = self.next_event_id();
                        self.refusals.remember(id.clone(), call.clone());
                        let text = CUT_MARKER.trim_start().to_owned();
                        self.line
                            .send(live_events::function_call_output(&id, &call, &text));
                        // The turn's `response.create`, if sent, was refused for the missing
                        // output: ask again after it.
                        if !self.turns.waits_on(&call) && self.may_continue() {
                            self.line.send(live_events::response_create());
                        }
                    }
                    None => {
                        tracing::error!(name: "live_output_refused", message = e.message.as_deref().unwrap_or(""), "live_output_refused");
                    }
                }
            }
            "function_call_outputs_required" if self.refusals.any() => {
                // Follows a refused output, which has been sent again with a new continuation.
                tracing::info!(name: "live_continuation_refused", "live_continuation_refused");
            }
            _ => {
                tracing::warn!(name: "live_error_event", code = %code, kind = e.kind.as_deref().unwrap_or(""), param = e.param.as_deref().unwrap_or(""), message = e.message.as_deref().unwrap_or(""), "live_error_event");
                metrics::counter!("switchboard_live_error_events_total").increment(1);
            }
        }
    }

    fn start_call(
        &mut self,
        key: String,
        call: String,
        name: String,
        arguments: String,
        item_id: Option<String>,
    ) {
        if !self.started.insert(&call) {
            return;
        }
        self.timers.insert(call.clone(), Instant::now());
        let response_id = self.turns.add_call(key, &call);
        let config = self.session.config();
        let mut decided = None;
        if let Ok(entry) = config.resolve(&self.agent, &name) {
            let m = entry.tool.messages();
            if let Some(start) = &m.start {
                let id = self.next_event_id();
                self.line.send(live_events::commentary(&id, start));
                self.fillers.spoke(start);
            }
            // The filler: the tool's `messages.delayed` (or the agent's `filler`), at once for a
            // tool expected to outlast the turn budget (see `switchboard_runtime::adaptive`).
            let policy = adaptive::decide(&config, &self.agent, &entry.tool);
            if let (Some(text), Some(after)) = (
                policy.filler_text(&config, &self.agent, &entry.tool),
                policy.filler_after(),
            ) {
                self.delayed.insert(call.clone(), text.to_owned());
                self.line.delayed_after(call.clone(), after);
            }
            decided = Some(policy);
        }
        let invocation = self
            .line
            .invocation(call, name, arguments, response_id, item_id);
        match decided {
            Some(policy) => self.session.submit_decided(invocation, policy),
            None => self.session.submit(invocation),
        }
    }

    /// Whether the backend may be continued: not once the call is leaving.
    fn may_continue(&self) -> bool {
        !self.line.transferred && self.goodbye.is_none()
    }

    /// Sends one `response.create` once every ended turn with calls has all its outputs.
    fn settle(&mut self) {
        if self.turns.settle() && self.may_continue() {
            self.line.send(live_events::response_create());
        }
    }

    fn deliver(&mut self, d: Delivery) {
        if d.async_completion {
            let text = format!(
                "The background task `{}` has finished. Tell the caller its result: {}",
                d.tool, d.result.output
            );
            if self.may_continue() {
                let id = self.next_event_id();
                self.line.send(live_events::commentary(&id, &text));
            }
            return;
        }
        let call = d.result.function_call_id.clone();
        if self.resumed && !self.started.contains(&call) {
            self.adopt(call.clone());
        }
        if !self.answered.insert(&call) {
            return;
        }
        self.fillers.done(&call);
        if let Some(t0) = self.timers.remove(&call) {
            metrics::histogram!("switchboard_live_tool_seconds").record(t0.elapsed().as_secs_f64());
        }
        if let Some(h) = &d.handoff
            && let Some(profile) = self.agents.get(&h.agent)
        {
            // The next delegations reason as the new agent, with its tools.
            self.agent = h.agent.clone();
            self.line.send(live_events::session_update(profile));
        }
        let output = budget::fit(
            &d.result.output,
            self.line.options.live_turn_budget,
            self.turns.bytes_of(&call),
        );
        if output.len() < d.result.output.len() {
            tracing::warn!(name: "live_output_cut", call_id = %call, bytes = d.result.output.len(), kept = output.len(), "live_output_cut");
            metrics::counter!("switchboard_live_outputs_cut_total").increment(1);
        }
        self.turns.add_bytes(&call, output.len());
        // Every call gets its output, also once the call is leaving: the backend conversation
        // stays whole. Only the continuation stops.
        let id = self.next_event_id();
        self.refusals.remember(id.clone(), call.clone());
        self.line
            .send(live_events::function_call_output(&id, &call, &output));
        self.turns.answered(&call);
        self.settle();
    }

    /// Once the answers owed before a hang-up are out: the goodbye goes to the voice model (the
    /// hang-up follows once it has been quiet), or, without one, the hang-up is due now.
    fn say_goodbye(&mut self) {
        if !self.line.owed.is_empty() {
            return;
        }
        let Some(g) = &mut self.goodbye else {
            return;
        };
        if g.placed {
            return;
        }
        g.placed = true;
        match g.text.clone() {
            Some(text) => {
                self.seq += 1;
                let id = format!("bye_{}", self.seq);
                self.line.send(live_events::commentary(&id, &text));
            }
            None => g.at = Some(Instant::now()),
        }
    }
}

impl LineDriver for LiveDriver {
    fn line(&self) -> &Line {
        &self.line
    }

    fn line_mut(&mut self) -> &mut Line {
        &mut self.line
    }

    fn on_text(&mut self, text: &str) -> Step {
        self.on_event(text)
    }

    fn on_delivery(&mut self, delivery: Delivery) {
        self.deliver(delivery);
        self.say_goodbye();
    }

    fn on_owed_settled(&mut self) {
        self.say_goodbye();
    }

    /// A running tool's filler is due: its own (or the agent's) first, then, while it still
    /// runs, one in new words each time the caller has heard nothing for the turn budget.
    fn on_delayed(&mut self, call: String) {
        if self.answered.contains(&call) || !self.timers.contains_key(&call) || !self.may_continue()
        {
            self.delayed.remove(&call);
            self.fillers.done(&call);
            return;
        }
        let budget = self.session.config().turn_budget(&self.agent);
        if let Some(text) = self.delayed.remove(&call) {
            let id = self.next_event_id();
            self.line.send(live_events::commentary(&id, &text));
            let wait = self.fillers.first(&call, &text, budget);
            self.line.delayed_after(call, wait);
            return;
        }
        match self.fillers.due(&call, budget) {
            Due::Say(wait) => {
                let id = self.next_event_id();
                self.line.send(live_events::commentary(&id, STILL_WORKING));
                self.line.delayed_after(call, wait);
            }
            Due::Later(wait) => self.line.delayed_after(call, wait),
            Due::Done => {}
        }
    }

    fn on_transferred(&mut self) {
        self.delayed.clear();
        self.fillers = Fillers::default();
    }

    // A function call answered over the call's MCP endpoint made another agent active (Live
    // calls are given function tools, but a client may still use that endpoint).
    fn on_handed_off(&mut self, agent: String) {
        if let Some(profile) = self.agents.get(&agent) {
            self.line.send(live_events::session_update(profile));
            self.agent = agent;
        }
    }

    fn hanging_up(&self) -> bool {
        self.goodbye.is_some()
    }

    fn on_hangup(&mut self, goodbye: Option<String>) -> Step {
        self.delayed.clear();
        self.goodbye = Some(Goodbye {
            text: goodbye,
            placed: false,
            at: None,
            deadline: Instant::now() + self.line.options.goodbye_timeout,
        });
        self.say_goodbye();
        Step::Go
    }

    fn hangup_at(&self) -> Option<Instant> {
        self.goodbye
            .as_ref()
            .map(|g| g.at.map_or(g.deadline, |at| at.min(g.deadline)))
    }

    fn on_hangup_due(&mut self) -> Step {
        Step::HangUp
    }
}
