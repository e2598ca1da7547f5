//! Keyless signers: an identity (an OIDC issuer and a subject) whose
//! short-lived certificate a Fulcio of the trust root issued. A bundle is
//! checked by sigstore-verify against the trust root: the certificate's
//! chain to a Fulcio, valid at a time the root vouches for (a timestamp
//! authority's signed time, or a transparency log's, as the root lists
//! them), its SCT when the root lists certificate-transparency logs, and
//! the signature over the statement. The identity is then compared here,
//! so that a refusal names what the certificate says.

use sigstore_verify::trust_root::TrustedRoot;
use sigstore_verify::types::{Bundle as SigstoreBundle, Sha256Hash};
use sigstore_verify::{VerificationPolicy, Verifier};

use crate::SignatureError;

/// The subject a keyless signer's certificate must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// Exactly this.
    Exact(String),
    /// Beginning so.
    Prefix(String),
}

/// A keyless signer.
#[derive(Clone, Debug)]
pub struct Identity {
    name: String,
    issuer: String,
    subject: Subject,
    id: String,
}

impl Identity {
    /// The identity of `subject` vouched for by `issuer`, called `name`
    /// (its identity when `None`).
    pub fn new(name: Option<String>, issuer: impl Into<String>, subject: Subject) -> Self {
        let issuer = issuer.into();
        let id = match &subject {
            Subject::Exact(s) => format!("keyless:{issuer} {s}"),
            Subject::Prefix(s) => format!("keyless:{issuer} {s}*"),
        };
        let name = name.unwrap_or_else(|| id.trim_start_matches("keyless:").to_owned());
        Self {
            name,
            issuer,
            subject,
            id,
        }
    }

    /// What messages call it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What a record of a verification keeps of it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What it asks of a certificate, for people.
    fn wanted(&self) -> String {
        match &self.subject {
            Subject::Exact(s) => format!("subject {s:?} from issuer {:?}", self.issuer),
            Subject::Prefix(s) => format!("a subject starting {s:?} from issuer {:?}", self.issuer),
        }
    }

    fn admits(&self, subject: &str, issuer: &str) -> bool {
        issuer == self.issuer
            && match &self.subject {
                Subject::Exact(s) => subject == s,
                Subject::Prefix(p) => subject.starts_with(p.as_str()),
            }
    }
}

/// A Sigstore trust root, ready to verify with.
pub struct Trust {
    name: String,
    verifier: Verifier,
    tlogs: bool,
    ctlogs: bool,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Trust {
    /// The trust root `json` (a `trusted_root.json`), called `name`.
    pub fn from_json(name: impl Into<String>, json: &str) -> Result<Self, SignatureError> {
        let name = name.into();
        let invalid = |why: String| SignatureError::TrustRoot {
            name: name.clone(),
            why,
        };
        let root = TrustedRoot::from_json(json).map_err(|e| invalid(e.to_string()))?;
        if root.certificate_authorities.is_empty() {
            return Err(invalid(
                "it lists no certificate authority (Fulcio) to certify keyless signers".into(),
            ));
        }
        let verifier = Verifier::new(&root).map_err(|e| invalid(e.to_string()))?;
        Ok(Self {
            tlogs: !root.tlogs.is_empty(),
            ctlogs: !root.ctlogs.is_empty(),
            name,
            verifier,
        })
    }

    /// What `bundle` (`source`, raw JSON) signed by a certificate says of
    /// `identity` for `digest`: `Ok(())` if it is that identity's signature
    /// of that digest, else the refusal naming what did not match.
    pub(super) fn check(
        &self,
        image: &str,
        digest: &str,
        source: &str,
        raw: &[u8],
        identity: &Identity,
    ) -> Result<(), SignatureError> {
        let untrusted = |why: String| SignatureError::Untrusted {
            image: image.to_owned(),
            signer: identity.name.clone(),
            why: format!("{source}: {why}"),
        };
        let json = std::str::from_utf8(raw).map_err(|e| untrusted(e.to_string()))?;
        let bundle = SigstoreBundle::from_json(json).map_err(|e| untrusted(e.to_string()))?;
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        let artifact = Sha256Hash::from_hex(hex).map_err(|e| untrusted(e.to_string()))?;
        // The root says what proves the signing time: its logs if it lists
        // any, else its timestamp authorities.
        let mut policy = VerificationPolicy::any_identity();
        if !self.tlogs {
            policy = policy.skip_tlog_unsafe();
        }
        if !self.ctlogs {
            policy = policy.skip_sct();
        }
        let result = self
            .verifier
            .verify(artifact, &bundle, &policy)
            .map_err(|e| {
                untrusted(format!(
                    "not verified against the trust root {}: {e}",
                    self.name
                ))
            })?;
        let subject = result.identity().map(|s| s.as_str().to_owned());
        let issuer = result.issuer().map(str::to_owned);
        if subject
            .as_deref()
            .zip(issuer.as_deref())
            .is_some_and(|(s, i)| identity.admits(s, i))
        {
            return Ok(());
        }
        Err(SignatureError::IdentityMismatch {
            image: image.to_owned(),
            signer: identity.name.clone(),
            wanted: identity.wanted(),
            subject: subject.unwrap_or_else(|| "(none)".into()),
            issuer: issuer.unwrap_or_else(|| "(none)".into()),
        })
    }
}
