//! A verification key: ECDSA P-256, what `cosign generate-key-pair` makes.

use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _};
use sha2::{Digest as _, Sha256};

use crate::SignatureError;

/// A verification key, with the name messages and the status give it.
#[derive(Clone, Debug)]
pub struct PublicKey {
    name: String,
    key: VerifyingKey,
    fingerprint: String,
}

impl PublicKey {
    /// The key in PEM (`-----BEGIN PUBLIC KEY-----`), called `name` in messages.
    pub fn from_pem(name: impl Into<String>, pem: &str) -> Result<Self, SignatureError> {
        let name = name.into();
        let invalid = |why: String| SignatureError::Key {
            name: name.clone(),
            why,
        };
        let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| {
            invalid(format!(
                "not an ECDSA P-256 public key in PEM ({e}); cosign's keys are"
            ))
        })?;
        let der = key
            .to_public_key_der()
            .map_err(|e| invalid(format!("cannot encode it: {e}")))?;
        let fingerprint = format!("sha256:{}", hex::encode(Sha256::digest(der.as_bytes())));
        Ok(Self {
            name,
            key,
            fingerprint,
        })
    }

    /// What messages call it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// sha256 of its DER encoding: what a record of a verification keeps.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Whether `signature` (base64 of DER, or of the raw 64 bytes) is this
    /// key's over `message`.
    pub(super) fn signed(&self, message: &[u8], signature: &str) -> bool {
        decode(signature).is_some_and(|s| self.key.verify(message, &s).is_ok())
    }
}

fn decode(signature: &str) -> Option<Signature> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(signature.trim())
        .ok()?;
    Signature::from_der(&bytes)
        .or_else(|_| Signature::from_slice(&bytes))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_are_not_p256_public_keys_are_refused_by_name() {
        let error = PublicKey::from_pem(
            "inline[0]",
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
        )
        .expect_err("not a key");
        assert!(
            error
                .to_string()
                .starts_with("verification key inline[0]: not an ECDSA P-256"),
            "{error}"
        );
    }
}
