//! Why an image could not be had, or could not be trusted.

/// Why an image could not be pulled or pushed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The reference does not parse, or names neither a tag nor a digest.
    #[error("image reference {image:?}: {why}")]
    Reference {
        /// The reference as written.
        image: String,
        /// What is wrong with it.
        why: String,
    },
    /// Plain HTTP was asked for a registry that is not on this machine.
    #[error("plain HTTP is allowed only for a loopback registry, not {registry}")]
    PlainHttpNotLoopback {
        /// The registry.
        registry: String,
    },
    /// No client for the registry could be made (its TLS set-up failed).
    #[error("cannot make a client for registry {registry}")]
    Client {
        /// The registry.
        registry: String,
        /// The cause.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The registry could not be reached or did not answer.
    #[error("registry {registry} is unreachable")]
    Unreachable {
        /// The registry.
        registry: String,
        /// The cause.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The registry answered with an error (no such repository or tag, denied, ...).
    #[error("registry {registry} refused {what}")]
    Registry {
        /// The registry.
        registry: String,
        /// What was asked for.
        what: String,
        /// Its answer.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The manifest is not one image holding one component.
    #[error("{image}: {why}")]
    Layout {
        /// The image by digest.
        image: String,
        /// What is wrong with it.
        why: String,
    },
    /// The component is larger than the operator takes.
    #[error("{image}: the component is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// The image by digest.
        image: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// An answer of the registry (a manifest, an index, a token, an error)
    /// is longer than the operator reads: it was not read to its end.
    #[error("registry {registry} sent more than {limit} bytes for {what}")]
    AnswerTooLarge {
        /// The registry.
        registry: String,
        /// What was asked for.
        what: String,
        /// The most bytes read.
        limit: u64,
    },
    /// The pull did not end within its deadline, however steadily the
    /// registry kept sending.
    #[error("the pull of {image} did not end within {limit:?}: {what} was still coming")]
    Deadline {
        /// The image as the module names it.
        image: String,
        /// What was being read when the deadline came.
        what: String,
        /// The deadline.
        limit: std::time::Duration,
    },
    /// A local file could not be read (pushing).
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The record of verified images could not be written.
    #[error("cannot write the image record {path}")]
    Record {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Whether the registry gave no answer, as opposed to answering no: it
    /// could not be reached, or did not finish within the pull's deadline.
    /// What was verified before may then serve on.
    pub fn is_unanswered(&self) -> bool {
        matches!(self, Self::Unreachable { .. } | Self::Deadline { .. })
    }
}

/// Why an image's signatures do not admit it.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// A verification key is not a usable public key.
    #[error("verification key {name}: {why}")]
    Key {
        /// Which key.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The image has no cosign signature, in either layout.
    #[error(
        "{image} has no cosign signature (neither a Sigstore bundle referring to it nor a .sig manifest)"
    )]
    NotSigned {
        /// The image by digest.
        image: String,
    },
    /// The image is signed, but not by the keys the policy asks for.
    #[error(
        "{image} is not signed as the policy asks ({policy}): signed by {signed} of its signers ({signatures} signature(s) checked){why}"
    )]
    Unsatisfied {
        /// The image by digest.
        image: String,
        /// What the policy asks, for people.
        policy: String,
        /// The keys that did sign it, or "none of them".
        signed: String,
        /// How many signatures were found.
        signatures: usize,
        /// What refused the signers that did not sign, `; ` first; or empty.
        why: String,
    },
    /// A keyless signature does not verify against the trust root: its
    /// certificate's chain, validity at the signing time, timestamps, log
    /// entries or signature.
    #[error("{image}: the signature for keyless signer {signer} is untrusted: {why}")]
    Untrusted {
        /// The image by digest.
        image: String,
        /// The signer's name.
        signer: String,
        /// What did not verify.
        why: String,
    },
    /// A keyless signature verifies, but by another identity.
    #[error(
        "{image}: signed by subject {subject:?} from issuer {issuer:?}, not keyless signer {signer} ({wanted})"
    )]
    IdentityMismatch {
        /// The image by digest.
        image: String,
        /// The signer's name.
        signer: String,
        /// What the signer asks.
        wanted: String,
        /// The certificate's subject.
        subject: String,
        /// The certificate's OIDC issuer.
        issuer: String,
    },
    /// The image's provenance is not what the policy asks.
    #[error("{image}: its provenance is not as the policy asks ({wanted}): {why}")]
    Provenance {
        /// The image by digest.
        image: String,
        /// What the policy asks.
        wanted: String,
        /// What was found instead.
        why: String,
    },
    /// A trust root is not a usable Sigstore trusted root.
    #[error("trust root {name}: {why}")]
    TrustRoot {
        /// Which root.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// What is stored as the image's signatures is not one: a bundle that
    /// does not parse, a referrer that is not a bundle, a statement that
    /// is not cosign's.
    #[error("{image}: its signatures are malformed: {why}")]
    Malformed {
        /// The image by digest.
        image: String,
        /// What is wrong with them.
        why: String,
    },
    /// A valid signature signs another digest than the image's.
    #[error("{image}: the signature by {key} is for {signed}, not this digest")]
    DigestMismatch {
        /// The image by digest.
        image: String,
        /// The key whose signature it is.
        key: String,
        /// The digest it signs.
        signed: String,
    },
    /// A valid signature of this digest names another repository than the
    /// image's: it was made for a copy elsewhere, and says nothing of this one.
    #[error("{image}: the signature by {key} is for the repository {signed}, not this one")]
    RepositoryMismatch {
        /// The image by digest.
        image: String,
        /// The key whose signature it is.
        key: String,
        /// The repository it names (`critical.identity.docker-reference`).
        signed: String,
    },
    /// Fetching the signatures failed.
    #[error("cannot read the signatures of {image}")]
    Fetch {
        /// The image by digest.
        image: String,
        /// The cause.
        #[source]
        source: Box<Error>,
    },
}
