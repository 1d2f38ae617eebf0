//! Values sealed at rest: AES-256-GCM under the deployment's master key.
//!
//! A sealed value is `[format version 1][96-bit random nonce][ciphertext and 128-bit tag]`.
//! The store also binds each value to where it lives (associated data such as
//! `secret/<tenant>/<name>`), so a row copied to another tenant or name does not open.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, Generate, KeyInit, Nonce, Payload};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use secrecy::{ExposeSecret, SecretBox, SecretString};

use crate::StoreError;

/// The environment variable that holds the master key (base64 of 32 bytes).
pub const MASTER_KEY_ENV: &str = "SWITCHBOARD_MASTER_KEY";

const FORMAT_V1: u8 = 1;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// The 32-byte key that seals secrets at rest; zeroed on drop and redacted in `Debug`.
pub struct MasterKey(SecretBox<[u8; 32]>);

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey([redacted])")
    }
}

impl Clone for MasterKey {
    fn clone(&self) -> Self {
        let bytes = *self.0.expose_secret();
        MasterKey(SecretBox::init_with(|| bytes))
    }
}

impl MasterKey {
    /// Reads a key from base64 (standard or URL-safe, padding optional) of exactly 32 bytes.
    pub fn from_base64(s: &str) -> Result<Self, StoreError> {
        let s = s.trim();
        let bytes = STANDARD
            .decode(s)
            .or_else(|_| URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')))
            .map_err(|_| bad_key())?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| bad_key())?;
        Ok(MasterKey(SecretBox::init_with(|| bytes)))
    }

    /// A new random key from the operating system's generator.
    ///
    /// Panics only if the OS random generator fails, which modern systems do not;
    /// [`MasterKey::load_or_create`] reports that case as an error instead.
    pub fn generate() -> Self {
        MasterKey(SecretBox::init_with(<[u8; 32] as Generate>::generate))
    }

    fn try_generate() -> Result<Self, StoreError> {
        let bytes = <[u8; 32] as Generate>::try_generate().map_err(|_| StoreError::Crypto)?;
        Ok(MasterKey(SecretBox::init_with(|| bytes)))
    }

    /// The key as standard base64 (44 characters), e.g. to print once for the operator.
    pub fn to_base64(&self) -> SecretString {
        SecretString::from(STANDARD.encode(self.0.expose_secret()))
    }

    /// `SWITCHBOARD_MASTER_KEY` if set (base64), else the key file at `path`; creates the file
    /// (mode 0600 on unix) with a new key when neither exists; returns (key, Some(path) if created).
    pub fn load_or_create(
        env_value: Option<&str>,
        path: &Path,
    ) -> Result<(Self, Option<PathBuf>), StoreError> {
        if let Some(v) = env_value.filter(|v| !v.trim().is_empty()) {
            return Ok((MasterKey::from_base64(v)?, None));
        }
        match read_key_file(path) {
            Ok(key) => return Ok((key, None)),
            Err(StoreError::KeyFile { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let key = MasterKey::try_generate()?;
        let key_file = |source| StoreError::KeyFile {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(key_file)?;
        }
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let mut file = match options.open(path) {
            Ok(f) => f,
            // Another process created it first: use theirs, so both agree on one key.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Ok((read_key_file(path)?, None));
            }
            Err(e) => return Err(key_file(e)),
        };
        let encoded = key.to_base64();
        file.write_all(encoded.expose_secret().as_bytes())
            .and_then(|()| file.write_all(b"\n"))
            .and_then(|()| file.sync_all())
            .map_err(key_file)?;
        tracing::info!(
            name: "master_key_created",
            path = %path.display(),
            "master_key_created"
        );
        Ok((key, Some(path.to_owned())))
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(&(*self.0.expose_secret()).into())
    }
}

fn bad_key() -> StoreError {
    StoreError::Invalid(format!(
        "the master key must be base64 of exactly 32 bytes (44 characters); set {MASTER_KEY_ENV} \
         to the key this database was created with, or generate one with `openssl rand -base64 32`"
    ))
}

fn read_key_file(path: &Path) -> Result<MasterKey, StoreError> {
    let text = std::fs::read_to_string(path).map_err(|source| StoreError::KeyFile {
        path: path.to_owned(),
        source,
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                name: "master_key_file_permissions",
                path = %path.display(),
                "master_key_file_permissions: the key file is readable by others; chmod 600 it"
            );
        }
    }
    MasterKey::from_base64(&text)
}

/// Seals `plaintext` under `key` with a fresh random nonce.
pub fn seal(key: &MasterKey, plaintext: &[u8]) -> Result<Vec<u8>, StoreError> {
    seal_with(key, plaintext, b"")
}

/// Opens a value made by [`seal`]; a wrong key or altered bytes give [`StoreError::Crypto`].
pub fn open(key: &MasterKey, sealed: &[u8]) -> Result<Vec<u8>, StoreError> {
    open_with(key, sealed, b"")
}

/// Seals `plaintext` bound to `aad` (authenticated, not encrypted): it opens only with the same `aad`.
pub fn seal_with(key: &MasterKey, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, StoreError> {
    let nonce = Nonce::<Aes256Gcm>::try_generate().map_err(|_| StoreError::Crypto)?;
    let ciphertext = key
        .cipher()
        .encrypt(
            &nonce,
            Payload {
                msg: plaintext,
                aad,
            },
        )
        // Only a plaintext beyond AES-GCM's 64 GiB limit fails here.
        .map_err(|_| StoreError::Invalid("the value is too large to seal".to_owned()))?;
    let mut out = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
    out.push(FORMAT_V1);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ciphertext);
    Ok(out)
}

/// Opens a value made by [`seal_with`] with the same `aad`.
pub fn open_with(key: &MasterKey, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, StoreError> {
    let Some((&FORMAT_V1, rest)) = sealed.split_first() else {
        return Err(StoreError::Crypto);
    };
    if rest.len() < NONCE_LEN + TAG_LEN {
        return Err(StoreError::Crypto);
    }
    let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
    let nonce = Nonce::<Aes256Gcm>::try_from(nonce).map_err(|_| StoreError::Crypto)?;
    key.cipher()
        .decrypt(
            &nonce,
            Payload {
                msg: ciphertext,
                aad,
            },
        )
        .map_err(|_| StoreError::Crypto)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn round_trip_and_fresh_nonces() {
        let key = MasterKey::generate();
        let a = seal(&key, b"hello").unwrap();
        let b = seal(&key, b"hello").unwrap();
        assert_ne!(a, b, "each seal uses a new nonce");
        assert_eq!(a.len(), 1 + 12 + 5 + 16);
        assert_eq!(open(&key, &a).unwrap(), b"hello");
        assert_eq!(open(&key, &b).unwrap(), b"hello");
    }

    #[test]
    fn wrong_key_tampering_and_aad_fail() {
        let key = MasterKey::generate();
        let other = MasterKey::generate();
        let sealed = seal_with(&key, b"s3cret", b"secret/acme/x").unwrap();
        assert!(matches!(
            open_with(&other, &sealed, b"secret/acme/x"),
            Err(StoreError::Crypto)
        ));
        assert!(matches!(
            open_with(&key, &sealed, b"secret/evil/x"),
            Err(StoreError::Crypto)
        ));
        let mut bad = sealed.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(
            open_with(&key, &bad, b"secret/acme/x"),
            Err(StoreError::Crypto)
        ));
        assert!(matches!(open(&key, &[]), Err(StoreError::Crypto)));
        assert!(matches!(open(&key, &[1, 2, 3]), Err(StoreError::Crypto)));
    }

    #[test]
    fn base64_round_trip_and_redaction() {
        let key = MasterKey::generate();
        let text = key.to_base64();
        assert_eq!(text.expose_secret().len(), 44);
        let again = MasterKey::from_base64(text.expose_secret()).unwrap();
        let sealed = seal(&key, b"x").unwrap();
        assert_eq!(open(&again, &sealed).unwrap(), b"x");
        assert_eq!(format!("{key:?}"), "MasterKey([redacted])");
        let e = MasterKey::from_base64("c2hvcnQ=").unwrap_err();
        assert!(e.to_string().contains("32 bytes"), "{e}");
        assert!(!e.to_string().contains("c2hvcnQ"), "{e}");
        assert!(MasterKey::from_base64("not base64 at all!").is_err());
    }
}
