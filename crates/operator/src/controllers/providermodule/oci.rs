//! A module's OCI source: its tag resolved to a digest, that digest's
//! cosign signature checked before anything is compiled, the component
//! pulled (or taken from the precompiled cache by the record of what was
//! verified), and, with the registry down, what was verified before.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use super::FETCH_RETRY;
use crate::api::conditions::Desired;
use crate::api::providermodule::{
    KeySelector, OciSource, ProviderModuleSpec, ProviderModuleStatus, PublicKeySource,
};
use crate::api::{ConditionType, ProviderModule, Reason};
use crate::controllers::context::Context;
use crate::controllers::credentials::{allowed_secret, credentials_namespace};
use crate::controllers::error::Error;
use crate::controllers::outcome::Wait;
use crate::controllers::reconciler::Scope;
use crate::oci::{self, Auth, ImageRef, PublicKey, Record, Records, SignatureError};
use crate::wasm::ProviderSource;

/// How often a tag is resolved again when the module says nothing.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);
/// The key read from a Secret or ConfigMap that names none.
const DEFAULT_KEY: &str = "cosign.pub";
/// The `.dockerconfigjson` key of a pull Secret.
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// A component to load, and where it came from.
pub(super) struct Fetched {
    /// Its bytes, or the precompiled cache's copy.
    pub source: ProviderSource,
    /// `sha256:<hex>` of the component.
    pub digest: String,
    /// The image it came from, for OCI sources.
    pub origin: Option<Origin>,
}

/// The image a component came from.
pub(super) struct Origin {
    /// `REGISTRY/REPOSITORY@sha256:...`.
    pub image: String,
    /// What to remember of it once it is in service.
    pub record: Record,
    /// The key whose signature admitted it.
    pub signed_by: Option<String>,
    /// Why the registry was not asked, if it was not.
    pub offline: Option<String>,
    /// When to resolve the tag again, if the image names one.
    pub refresh: Option<Duration>,
}

/// The component `oci` names, or why it cannot be had; says in
/// `SourceAvailable` whether the registry answered.
pub(super) async fn fetch(
    scope: &mut Scope<ProviderModule>,
    ctx: &Context,
    oci: &OciSource,
) -> Result<Result<Fetched, Wait>, Error> {
    let module = scope.object.clone();
    let name = kube::ResourceExt::name_any(&*module);
    let spec = &module.spec;
    let image = match ImageRef::parse(&oci.image, oci.plain_http) {
        Ok(image) => image,
        Err(error) => {
            return Ok(Err(Wait::on_change(
                Reason::ImageInvalid,
                crate::report::error_chain(&error),
            )));
        }
    };
    let auth = match pull_auth(ctx, &name, oci, &image).await? {
        Ok(auth) => auth,
        Err(wait) => return Ok(Err(wait)),
    };
    let keys = match verification_keys(ctx, &name, spec).await? {
        Ok(keys) => keys,
        Err(wait) => return Ok(Err(wait)),
    };
    let records = records(ctx);
    let refresh = image.digest().is_none().then(|| {
        oci.interval_seconds
            .map_or(DEFAULT_INTERVAL, |s| Duration::from_secs(u64::from(s)))
    });

    match online(ctx, &image, &auth, &keys, records.as_ref(), refresh).await {
        Ok(fetched) => {
            let served = fetched.origin.as_ref().map_or("", |o| o.image.as_str());
            scope.set(Desired::holds(
                ConditionType::SourceAvailable,
                Reason::Ready,
                format!("{image} is {served}"),
            ));
            Ok(Ok(fetched))
        }
        Err(Miss::Refused(wait)) => {
            // The registry answered: it is the image that is refused, and
            // Ready says why, unless the registry has none to give.
            scope.set(if wait.reason == Reason::FetchFailed {
                Desired::fails(
                    ConditionType::SourceAvailable,
                    wait.reason,
                    wait.message.clone(),
                )
            } else {
                Desired::holds(
                    ConditionType::SourceAvailable,
                    Reason::Ready,
                    format!("{image} answered"),
                )
            });
            Ok(Err(wait))
        }
        Err(Miss::Unanswered(reason, why)) => {
            scope.set(Desired::fails(
                ConditionType::SourceAvailable,
                reason,
                why.clone(),
            ));
            let known = module.status.as_ref().and_then(|s| known_digest(&image, s));
            Ok(offline(
                ctx,
                &image,
                known,
                &keys,
                records.as_ref(),
                (reason, &why),
            ))
        }
    }
}

/// Why the registry did not give a component.
enum Miss {
    /// It could not be reached, or did not finish within the pull's
    /// deadline (the reason says which): what was verified before may serve.
    Unanswered(Reason, String),
    /// It answered, and what it gave is refused.
    Refused(Wait),
}

impl From<oci::Error> for Miss {
    fn from(error: oci::Error) -> Self {
        let why = crate::report::error_chain(&error);
        match error {
            oci::Error::Deadline { .. } => Self::Unanswered(Reason::PullTimedOut, why),
            e if e.is_unanswered() => Self::Unanswered(Reason::RegistryUnreachable, why),
            oci::Error::Layout { .. } | oci::Error::TooLarge { .. } => {
                Self::Refused(Wait::after(Reason::ImageInvalid, why, FETCH_RETRY))
            }
            _ => Self::Refused(Wait::after(Reason::FetchFailed, why, FETCH_RETRY)),
        }
    }
}

/// The component, asked of the registry: the tag resolved, the digest's
/// signature checked, the component pulled unless it is compiled already.
async fn online(
    ctx: &Context,
    image: &ImageRef,
    auth: &Auth,
    keys: &[PublicKey],
    records: Option<&Records>,
    refresh: Option<Duration>,
) -> Result<Fetched, Miss> {
    let session = ctx.settings.oci.session(image, auth)?;
    let digest = session.digest().await?;
    let signed = if keys.is_empty() {
        None
    } else {
        match oci::verify_signature(&session, &digest, keys).await {
            Ok(signed) => Some(signed),
            Err(SignatureError::Fetch { source, .. }) if source.is_unanswered() => {
                return Err((*source).into());
            }
            Err(error) => return Err(Miss::Refused(refused(&error))),
        }
    };
    let origin = |component_digest: String| Origin {
        image: image.by_digest(&digest),
        record: Record {
            manifest_digest: digest.clone(),
            component_digest,
            signed_by: signed.iter().map(|s| s.fingerprint.clone()).collect(),
        },
        signed_by: signed.as_ref().map(|s| s.key.clone()),
        offline: None,
        refresh,
    };
    // Compiled already: nothing to pull.
    if let Some(record) = records.and_then(|r| r.get(&digest))
        && ctx.runtime.is_precompiled(&record.component_digest)
    {
        return Ok(Fetched {
            source: ProviderSource::Precompiled(hex_of(&record.component_digest)),
            digest: record.component_digest.clone(),
            origin: Some(origin(record.component_digest)),
        });
    }
    let resolved = session.resolve(&digest).await?;
    let artifact = session.pull(resolved).await?;
    Ok(Fetched {
        source: ProviderSource::Bytes(artifact.bytes),
        digest: artifact.resolved.layer.digest.clone(),
        origin: Some(origin(artifact.resolved.layer.digest)),
    })
}

/// Remembers what was verified of the image now in service.
pub(super) fn remember(ctx: &Context, origin: &Origin) {
    let Some(records) = records(ctx) else {
        return;
    };
    if records.get(&origin.record.manifest_digest).as_ref() == Some(&origin.record) {
        return;
    }
    if let Err(error) = records.put(&origin.record) {
        // Serving works without it; a restart with the registry down does not.
        tracing::warn!(
            error = &error as &dyn std::error::Error,
            "cannot record the verified image"
        );
    }
}

/// The records of verified images, beside the precompiled components.
fn records(ctx: &Context) -> Option<Records> {
    ctx.runtime.cache_dir().map(|d| Records::new(d.join("oci")))
}

/// With the registry down: the digest last resolved (or pinned), if it
/// was verified with one of today's keys and its compilation is cached.
fn offline(
    ctx: &Context,
    image: &ImageRef,
    known: Option<String>,
    keys: &[PublicKey],
    records: Option<&Records>,
    (reason, why): (Reason, &str),
) -> Result<Fetched, Wait> {
    let unavailable = |what: String| Wait::after(reason, format!("{why}, and {what}"), FETCH_RETRY);
    let Some(digest) = known else {
        return Err(unavailable(format!("{image} was never resolved here")));
    };
    let Some(record) = records.and_then(|r| r.get(&digest)) else {
        return Err(unavailable(format!(
            "no verified copy of {} is cached",
            image.by_digest(&digest)
        )));
    };
    let signer = keys
        .iter()
        .find(|k| record.signed_by.iter().any(|f| f == k.fingerprint()));
    if !keys.is_empty() && signer.is_none() {
        return Err(unavailable(format!(
            "the cached {} was not verified with any of today's keys",
            image.by_digest(&digest)
        )));
    }
    if !ctx.runtime.is_precompiled(&record.component_digest) {
        return Err(unavailable(format!(
            "the compilation of {} is not cached",
            image.by_digest(&digest)
        )));
    }
    Ok(Fetched {
        source: ProviderSource::Precompiled(hex_of(&record.component_digest)),
        digest: record.component_digest.clone(),
        origin: Some(Origin {
            image: image.by_digest(&digest),
            signed_by: signer.map(|k| k.name().to_owned()),
            record,
            offline: Some(format!("{why}; serving what was verified before")),
            refresh: Some(FETCH_RETRY),
        }),
    })
}

/// The digest this module last served of `image`'s repository, or the one
/// `image` pins.
fn known_digest(image: &ImageRef, status: &ProviderModuleStatus) -> Option<String> {
    if let Some(digest) = image.digest() {
        return Some(digest.to_owned());
    }
    let served = status.image.as_deref()?;
    let (repository, digest) = served.split_once('@')?;
    (repository == image.repository()).then(|| digest.to_owned())
}

/// The condition of an image its signatures do not admit.
fn refused(error: &SignatureError) -> Wait {
    let reason = match error {
        SignatureError::Key { .. } => Reason::VerificationKeyInvalid,
        SignatureError::NotSigned { .. } => Reason::SignatureNotFound,
        SignatureError::WrongKey { .. } => Reason::SignatureUntrusted,
        SignatureError::DigestMismatch { .. } => Reason::SignatureDigestMismatch,
        SignatureError::RepositoryMismatch { .. } => Reason::SignatureRepositoryMismatch,
        SignatureError::Fetch { .. } => Reason::FetchFailed,
    };
    Wait::after(reason, crate::report::error_chain(error), FETCH_RETRY)
}

/// The registry credentials of `oci.pullSecret`, anonymous if it names none.
async fn pull_auth(
    ctx: &Context,
    name: &str,
    oci: &OciSource,
    image: &ImageRef,
) -> Result<Result<Auth, Wait>, Error> {
    let Some(secret) = &oci.pull_secret else {
        return Ok(Ok(Auth::Anonymous));
    };
    let found =
        match allowed_secret(ctx, name, "pull Secret", &secret.namespace, &secret.name).await? {
            Ok(found) => found,
            Err(wait) => return Ok(Err(wait)),
        };
    let config = found
        .data
        .unwrap_or_default()
        .remove(DOCKER_CONFIG_KEY)
        .map(|v| v.0)
        .unwrap_or_default();
    Ok(
        Auth::from_docker_config(&config, image.registry()).map_err(|why| {
            Wait::on_change(
                Reason::CredentialsKeyMissing,
                format!(
                    "the pull Secret {}/{}'s {DOCKER_CONFIG_KEY} {why}",
                    secret.namespace, secret.name
                ),
            )
        }),
    )
}

/// The module's verification keys, each read and parsed.
async fn verification_keys(
    ctx: &Context,
    name: &str,
    spec: &ProviderModuleSpec,
) -> Result<Result<Vec<PublicKey>, Wait>, Error> {
    let Some(verification) = &spec.verification else {
        return Ok(Ok(Vec::new()));
    };
    let mut keys = Vec::new();
    for (i, source) in verification.public_keys.iter().enumerate() {
        let (key_name, pem) = match key_pem(ctx, name, i, source).await? {
            Ok(found) => found,
            Err(wait) => return Ok(Err(wait)),
        };
        match PublicKey::from_pem(key_name, &pem) {
            Ok(key) => keys.push(key),
            Err(error) => return Ok(Err(refused(&error))),
        }
    }
    Ok(Ok(keys))
}

/// Key `i`'s name in messages and its PEM.
async fn key_pem(
    ctx: &Context,
    name: &str,
    i: usize,
    source: &PublicKeySource,
) -> Result<Result<(String, String), Wait>, Error> {
    let key_of = |selector: &KeySelector| selector.key.as_deref().unwrap_or(DEFAULT_KEY).to_owned();
    let missing = |kind: &str, selector: &KeySelector| {
        Wait::after(
            Reason::VerificationKeyInvalid,
            format!(
                "the {kind} {}/{} has no key {:?} (verification key {i})",
                selector.namespace,
                selector.name,
                key_of(selector)
            ),
            FETCH_RETRY,
        )
    };
    if let Some(pem) = &source.pem {
        return Ok(Ok((format!("publicKeys[{i}]"), pem.clone())));
    }
    if let Some(selector) = &source.secret {
        let found = match allowed_secret(
            ctx,
            name,
            "verification key Secret",
            &selector.namespace,
            &selector.name,
        )
        .await?
        {
            Ok(found) => found,
            Err(wait) => return Ok(Err(wait)),
        };
        let key = key_of(selector);
        return Ok(found
            .data
            .unwrap_or_default()
            .remove(&key)
            .map(|v| {
                (
                    format!("Secret {}/{}[{key}]", selector.namespace, selector.name),
                    String::from_utf8_lossy(&v.0).into_owned(),
                )
            })
            .ok_or_else(|| missing("Secret", selector)));
    }
    if let Some(selector) = &source.config_map {
        if let Some(wait) = credentials_namespace(
            ctx,
            name,
            "verification key ConfigMap",
            &selector.namespace,
            &selector.name,
        ) {
            return Ok(Err(wait));
        }
        let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &selector.namespace);
        let found = api
            .get_opt(&selector.name)
            .await
            .map_err(|source| Error::Get {
                kind: "ConfigMap",
                name: selector.name.clone(),
                source,
            })?;
        let key = key_of(selector);
        return Ok(found
            .and_then(|c| c.data)
            .and_then(|mut d| d.remove(&key))
            .map(|pem| {
                (
                    format!("ConfigMap {}/{}[{key}]", selector.namespace, selector.name),
                    pem,
                )
            })
            .ok_or_else(|| missing("ConfigMap", selector)));
    }
    Ok(Err(Wait::on_change(
        Reason::VerificationKeyInvalid,
        format!("verification key {i} names no pem, secret or configMap"),
    )))
}

fn hex_of(digest: &str) -> String {
    digest.strip_prefix("sha256:").unwrap_or(digest).to_owned()
}
