//! One Realtime call's side of the line (see [`crate::line`], which owns the socket and its
//! re-attach): function calls in, outputs and responses out.
//!
//! The driver hands each function call to the call session once,
//! sends each answer as a `function_call_output`, and asks for one `response.create` per model
//! response once all of that response's calls are answered and the response itself is done
//! (sending it earlier would collide with the active response). Filler speech for slow tools and
//! the goodbye before a hang-up wait for the model to be idle too, so nothing is said twice and
//! nothing is lost. A filler never holds an answer back: when a tool's answer is ready while
//! our filler is being said, the filler response is cancelled (`response.cancel`) and the
//! continuation follows at once. A slow tool gets a new filler each time the caller has heard
//! nothing for the agent's turn budget, worded anew each time (see [`fillers`]). A socket closed with any code but 1000 is re-attached like a dropped one;
//! a normal close (1000) is the end of the call.

mod fillers;
mod responses;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use switchboard_runtime::adaptive;
use switchboard_runtime::{CallSession, Delivery};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::events::{self, AgentProfile, ServerEvent};
use crate::line::{self, CallEnd, Line, LineDriver, Step, owed_continuation};
use crate::recent::RecentIds;
use fillers::{Filler, MAX_FILLERS};
use responses::{Responses, Settled};

/// What our last `response.create` was for, to recover when the API refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Answers,
    Speech,
    Goodbye,
}

/// A hang-up under way: the goodbye to ask for once the owed answers are out
/// ([`Line::owed`]), the response that says it, and the latest the call is hung up.
struct Goodbye {
    text: Option<String>,
    response: Option<String>,
    asked: bool,
    deadline: Instant,
}

pub(crate) struct Driver {
    line: Line,
    session: CallSession,
    agent: String,
    agents: Arc<HashMap<String, AgentProfile>>,
    // What the model is doing.
    active: Option<String>,
    /// We sent `response.create` and have not seen its `response.created`.
    requested: Option<Asked>,
    /// A `response.create` is owed for answered calls, to send when the model is idle.
    owe_response: bool,
    /// Filler speech to ask for once the model is idle: the function call it covers and its
    /// `response.create`.
    speech: VecDeque<(String, String)>,
    /// Our filler response, asked for or being said.
    filler: Option<Filler>,
    /// Fillers said so far for each running function call.
    fillers_said: HashMap<String, u32>,
    responses: Responses,
    started: RecentIds,
    answered: RecentIds,
    /// Function calls started at (for the overhead metric).
    timers: HashMap<String, Instant>,
    goodbye: Option<Goodbye>,
    /// The goodbye has been said (or there is none, and the owed answers are out): hang up.
    hangup_due: bool,
    /// `messages.delayed` of running calls, said once if still running when due.
    delayed: HashMap<String, String>,
    /// Taken over from a node that died (see [`Driver::run`]).
    resumed: bool,
}

impl Driver {
    pub(crate) fn new(
        line: Line,
        session: CallSession,
        agent: String,
        agents: Arc<HashMap<String, AgentProfile>>,
        resumed: bool,
    ) -> Driver {
        Driver {
            line,
            session,
            agent,
            agents,
            active: None,
            requested: None,
            owe_response: false,
            speech: VecDeque::new(),
            filler: None,
            fillers_said: HashMap::new(),
            responses: Responses::default(),
            started: RecentIds::default(),
            answered: RecentIds::default(),
            timers: HashMap::new(),
            goodbye: None,
            hangup_due: false,
            delayed: HashMap::new(),
            resumed,
        }
    }

    /// Runs the call until it ends. A taken-over call with no restored runs (their answers
    /// ask for speech themselves) owes the model one `response.create` for the last response
    /// answered just before the old owner died (`DriverOptions::continue_within`), unless the
    /// caller had cut that response off.
    pub(crate) async fn run(mut self) -> CallEnd {
        if self.resumed
            && let Some(snapshot) = self.session.snapshot().await
            && snapshot.pending.is_empty()
            && snapshot.restored.is_empty()
        {
            let last = owed_continuation(&snapshot, self.line.options.continue_within);
            if !last.is_empty() && last.iter().all(|r| !r.interrupted) {
                for record in last {
                    self.answered.insert(&record.function_call_id);
                }
                self.owe_response = true;
            }
        }
        line::run(self).await
    }

    fn send(&mut self, text: String) {
        self.line.send(text);
    }

    fn on_event(&mut self, text: &str) {
        let ev = match ServerEvent::parse(text) {
            Ok(ev) => ev,
            Err(e) => {
                tracing::warn!(name: "realtime_event_unreadable", error = %e, "realtime_event_unreadable");
                return;
            }
        };
        match ev.kind.as_str() {
            "response.created" => {
                if let Some(r) = ev.response {
                    if self.requested == Some(Asked::Goodbye)
                        && let Some(g) = &mut self.goodbye
                    {
                        g.response = Some(r.id.clone());
                    }
                    if self.requested == Some(Asked::Speech)
                        && let Some(f) = &mut self.filler
                        && f.response.is_none()
                    {
                        f.response = Some(r.id.clone());
                    }
                    self.responses.created(&r.id);
                    self.active = Some(r.id);
                }
                self.requested = None;
            }
            "response.function_call_arguments.done" => {
                let (Some(call), Some(name)) = (ev.call_id, ev.name) else {
                    return;
                };
                self.start_call(
                    call,
                    name,
                    ev.arguments.unwrap_or_default(),
                    ev.response_id,
                    ev.item_id,
                );
            }
            "response.output_item.done" => {
                if let Some(item) = ev.item
                    && item.kind == "function_call"
                    && let (Some(call), Some(name)) = (item.call_id, item.name)
                {
                    self.start_call(
                        call,
                        name,
                        item.arguments.unwrap_or_default(),
                        ev.response_id,
                        item.id,
                    );
                }
            }
            "response.done" => {
                if let Some(r) = ev.response {
                    self.response_done(r);
                }
            }
            "input_audio_buffer.dtmf_event_received" => {
                line::dtmf_received(self.line.api, ev.event.as_deref());
            }
            "error" => {
                let e = ev.error.unwrap_or_default();
                match e.code.as_deref() {
                    Some("conversation_already_has_active_response") => {
                        // The API started a response itself; ours is not needed, except a
                        // goodbye, which is asked again once the model is idle.
                        if self.requested == Some(Asked::Goodbye)
                            && let Some(g) = &mut self.goodbye
                        {
                            g.asked = false;
                        }
                        if self.requested == Some(Asked::Speech) {
                            self.filler = None;
                        }
                        self.requested = None;
                        tracing::debug!(name: "realtime_response_already_active", "realtime_response_already_active");
                    }
                    Some("response_cancel_not_active") => {}
                    code => {
                        tracing::warn!(name: "realtime_error_event", code = code.unwrap_or(""), kind = e.kind.as_deref().unwrap_or(""), message = e.message.as_deref().unwrap_or(""), "realtime_error_event");
                        metrics::counter!("switchboard_realtime_error_events_total").increment(1);
                    }
                }
            }
            _ => {}
        }
    }

    fn start_call(
        &mut self,
        call: String,
        name: String,
        arguments: String,
        response_id: Option<String>,
        item_id: Option<String>,
    ) {
        if !self.started.insert(&call) {
            return;
        }
        self.timers.insert(call.clone(), Instant::now());
        if let Some(r) = &response_id {
            self.responses.add_call(r, &call);
        }
        // What to say while it runs.
        let config = self.session.config();
        let mut decided = None;
        if let Ok(entry) = config.resolve(&self.agent, &name) {
            let m = entry.tool.messages();
            if let Some(start) = &m.start {
                self.speech.push_back((call.clone(), events::say(start)));
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

    fn response_done(&mut self, r: events::Response) {
        if self.active.as_deref() == Some(r.id.as_str()) {
            self.active = None;
        }
        // A function call only listed here (its `.done` was missed on a dropped socket).
        for item in r.output {
            if item.kind == "function_call"
                && let (Some(call), Some(name)) = (item.call_id, item.name)
            {
                self.start_call(
                    call,
                    name,
                    item.arguments.unwrap_or_default(),
                    Some(r.id.clone()),
                    item.id,
                );
            }
        }
        let cancelled = r.status == "cancelled";
        if cancelled {
            tracing::info!(name: "realtime_response_cancelled", response_id = %r.id, reason = r.status_details.and_then(|d| d.reason).unwrap_or_default(), "realtime_response_cancelled");
            self.session.cancel_response(&r.id);
        } else {
            self.session.response_done(&r.id);
        }
        if let Some(g) = &self.goodbye
            && g.response.as_deref() == Some(r.id.as_str())
        {
            // The goodbye has been said (or cut off by the caller): hang up now.
            self.hangup_due = true;
        }
        if let Some(f) = self
            .filler
            .take_if(|f| f.response.as_deref() == Some(r.id.as_str()))
        {
            self.filler_done(f, cancelled);
        }
        let settled = self.responses.done(&r.id, cancelled);
        self.settled(settled);
    }

    /// Our filler ended. Said to the end while its tool still runs, the next one is due once
    /// the caller has heard nothing for the turn budget; cut off (by us for the answer, or by
    /// the caller speaking), it is not followed by another.
    fn filler_done(&mut self, f: Filler, cancelled: bool) {
        if cancelled
            || self.answered.contains(&f.call)
            || self.fillers_said.get(&f.call).copied().unwrap_or(0) >= MAX_FILLERS
            || !self.timers.contains_key(&f.call)
        {
            return;
        }
        let budget = self.session.config().turn_budget(&self.agent);
        self.line.delayed_after(f.call, budget);
    }

    /// Owes a `response.create` for a response done with all its calls answered, unless the
    /// caller cut it off or the call is leaving.
    fn settled(&mut self, settled: Settled) {
        if settled == (Settled::Response { cancelled: false })
            && !self.line.transferred
            && self.goodbye.is_none()
        {
            self.owe_response = true;
        }
    }

    fn deliver(&mut self, d: Delivery) {
        if d.async_completion {
            let text = format!(
                "The background task `{}` has finished. Its result: {}",
                d.tool, d.result.output
            );
            self.send(events::system_message(&text));
            if !self.line.transferred && self.goodbye.is_none() {
                self.owe_response = true;
            }
            return;
        }
        let call = d.result.function_call_id.clone();
        if !self.answered.insert(&call) {
            return;
        }
        self.fillers_said.remove(&call);
        self.delayed.remove(&call);
        if let Some(t0) = self.timers.remove(&call) {
            metrics::histogram!("switchboard_realtime_tool_seconds")
                .record(t0.elapsed().as_secs_f64());
        }
        if let Some(h) = &d.handoff
            && let Some(profile) = self.agents.get(&h.agent)
        {
            // The new agent's instructions and tools go first, so the model reads the output
            // as the agent it has become.
            self.agent = h.agent.clone();
            self.send(events::session_update(profile.session()));
        }
        // Every function call gets its output, also once the call is being transferred (the
        // transfer's own call included): the conversation stays whole until the call ends.
        // Only `response.create` stops: the call is leaving, the model has nothing more to say.
        self.send(events::function_call_output(&call, &d.result.output));
        match self.responses.answered(&call) {
            Settled::Untracked if !d.interrupted && !self.line.transferred => {
                self.owe_response = true;
            }
            settled => self.settled(settled),
        }
    }

    /// Sends what waits for an idle model: the goodbye, then answers, then filler speech.
    fn pump(&mut self) {
        if let Some(active) = self.active.clone() {
            // An answer (or the goodbye) waits behind our filler: cut the filler short.
            if (self.owe_response || self.goodbye.is_some())
                && let Some(f) = &mut self.filler
                && f.response.as_deref() == Some(active.as_str())
                && !f.cancel_sent
            {
                f.cancel_sent = true;
                self.send(events::response_cancel(&active));
            }
            return;
        }
        if self.requested.is_some() {
            return;
        }
        if let Some(g) = &mut self.goodbye {
            // The answer of the function call that asked for the hang-up goes first: the
            // model hears that the call is ending, then says goodbye.
            if !g.asked && self.line.owed.is_empty() {
                g.asked = true;
                match g.text.clone() {
                    Some(text) => {
                        self.requested = Some(Asked::Goodbye);
                        self.send(events::say(&text));
                    }
                    None => self.hangup_due = true,
                }
            }
            return;
        }
        if self.owe_response {
            self.owe_response = false;
            self.requested = Some(Asked::Answers);
            self.send(events::response_create());
            return;
        }
        while let Some((call, event)) = self.speech.pop_front() {
            if self.answered.contains(&call) {
                continue;
            }
            self.requested = Some(Asked::Speech);
            self.filler = Some(Filler::asked(call));
            self.send(event);
            return;
        }
    }
}

impl LineDriver for Driver {
    fn line(&self) -> &Line {
        &self.line
    }

    fn line_mut(&mut self) -> &mut Line {
        &mut self.line
    }

    fn on_attached(&mut self) {
        self.pump();
    }

    fn on_text(&mut self, text: &str) -> Step {
        self.on_event(text);
        Step::Go
    }

    fn on_close(&mut self, frame: Option<CloseFrame>) -> Step {
        match frame {
            Some(frame) if frame.code == CloseCode::Normal => {
                // OpenAI closes normally when the call is over: nothing to re-attach to.
                tracing::info!(name: "realtime_socket_closed", code = u16::from(frame.code), "realtime_socket_closed");
                Step::End(self.line.ended_by_peer())
            }
            _ => Step::Dropped,
        }
    }

    fn on_delivery(&mut self, delivery: Delivery) {
        self.deliver(delivery);
    }

    fn on_delayed(&mut self, function_call_id: String) {
        if self.answered.contains(&function_call_id) || !self.timers.contains_key(&function_call_id)
        {
            return;
        }
        let said = self
            .fillers_said
            .entry(function_call_id.clone())
            .or_insert(0);
        if *said >= MAX_FILLERS {
            return;
        }
        // The tool's own delayed message first; later ones ask for new words.
        let event = match self.delayed.remove(&function_call_id) {
            Some(text) if *said == 0 => events::say(&text),
            _ if *said == 0 => return,
            _ => fillers::still_working(*said),
        };
        *said += 1;
        self.speech.push_back((function_call_id, event));
    }

    fn on_transferred(&mut self) {
        self.owe_response = false;
        self.speech.clear();
    }

    fn on_handed_off(&mut self, agent: String) {
        if let Some(profile) = self.agents.get(&agent) {
            self.agent = agent;
            self.send(events::session_update(profile.session()));
        }
    }

    fn hanging_up(&self) -> bool {
        self.goodbye.is_some()
    }

    fn on_hangup(&mut self, goodbye: Option<String>) -> Step {
        self.owe_response = false;
        self.speech.clear();
        self.goodbye = Some(Goodbye {
            text: goodbye,
            response: None,
            asked: false,
            deadline: Instant::now() + self.line.options.goodbye_timeout,
        });
        Step::Go
    }

    fn hangup_at(&self) -> Option<Instant> {
        if self.hangup_due {
            return Some(Instant::now());
        }
        self.goodbye.as_ref().map(|g| g.deadline)
    }

    fn on_hangup_due(&mut self) -> Step {
        if !self.hangup_due {
            tracing::warn!(name: "realtime_goodbye_timeout", owed = self.line.owed.len(), "realtime_goodbye_timeout");
        }
        self.hangup_due = false;
        Step::HangUp
    }

    fn after_step(&mut self, step: Step) -> Step {
        match step {
            Step::Go if self.hangup_due => {
                self.hangup_due = false;
                Step::HangUp
            }
            other => other,
        }
    }

    fn before_flush(&mut self) {
        self.pump();
    }
}
