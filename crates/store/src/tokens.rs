//! Short values sealed under the master key for the server's own use (the console's session
//! cookie), each bound to its purpose so one kind cannot be passed off as another.

use crate::crypto::{open_with, seal_with};
use crate::{Store, StoreError};

impl Store {
    /// Seals `plaintext` (AES-256-GCM under the master key) bound to `purpose`.
    pub fn seal_token(&self, purpose: &str, plaintext: &[u8]) -> Result<Vec<u8>, StoreError> {
        seal_with(&self.key, plaintext, purpose.as_bytes())
    }

    /// Opens a value [`Store::seal_token`] sealed for the same `purpose`.
    pub fn open_token(&self, purpose: &str, sealed: &[u8]) -> Result<Vec<u8>, StoreError> {
        open_with(&self.key, sealed, purpose.as_bytes())
    }
}
