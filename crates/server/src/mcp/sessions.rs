//! MCP sessions belong to the tenant and endpoint that opened them.
//!
//! rmcp's session manager knows session ids, not who opened them; one manager serves every
//! agent's endpoint. [`OwnedSessions`] wraps it and binds each session, when it is created, to
//! the [`Owner`] (tenant and endpoint) of the request that creates it (given by [`opened_by`] around the request, so
//! there is no moment when a session exists unbound). The door's middleware asks
//! [`OwnedSessions::owns`] before any request that names a session reaches rmcp: another
//! tenant's key, or another endpoint's path, finds no such session (404) and changes nothing.
//! The binding goes when the session closes (DELETE, the session idle time without a message
//! from its client, shutdown).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};

/// Who opened an MCP session: the tenant of the credential, and the endpoint (an agent's or a
/// call's path) it was opened on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub tenant_id: String,
    pub endpoint: String,
}

tokio::task_local! {
    /// The owner of the request being served, for a session it creates.
    static OPENER: Owner;
}

/// Runs `request` (the MCP service's handling of one authenticated request) as `owner`'s: a
/// session it creates is bound to `owner`.
pub async fn opened_by<F: Future>(owner: Owner, request: F) -> F::Output {
    OPENER.scope(owner, request).await
}

/// The owner of the request being served, when inside [`opened_by`].
pub fn current_opener() -> Option<Owner> {
    OPENER.try_with(Clone::clone).ok()
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// A session may only be created while serving an authenticated request.
    #[error("an MCP session can only be opened by an authenticated request")]
    NoOwner,
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// rmcp's in-memory sessions, each bound to the [`Owner`] that opened it.
#[derive(Debug)]
pub struct OwnedSessions {
    inner: LocalSessionManager,
    owners: Mutex<HashMap<SessionId, Owner>>,
}

impl OwnedSessions {
    /// Sessions closed after `idle` without a message from their client.
    pub fn new(idle: Duration) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        OwnedSessions {
            inner,
            owners: Mutex::new(HashMap::new()),
        }
    }

    /// Whether session `id` exists and was opened by `owner`.
    pub fn owns(&self, id: &str, owner: &Owner) -> bool {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .is_some_and(|o| o == owner)
    }

    /// How many sessions `tenant_id` has open.
    pub fn count_of(&self, tenant_id: &str) -> usize {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|o| o.tenant_id == tenant_id)
            .count()
    }
}

impl SessionManager for OwnedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let owner = current_opener().ok_or(SessionsError::NoOwner)?;
        let (id, transport) = self.inner.create_session().await?;
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), owner);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}
