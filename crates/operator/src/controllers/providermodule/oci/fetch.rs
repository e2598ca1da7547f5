//! A module's image asked of its registry: the pull Secret's credentials
//! read, the tag resolved, the digest's signature checked, the component
//! pulled unless it is compiled already, and `SourceAvailable` set to say
//! whether the registry answered. Apart from what serves with the registry
//! down, which this falls back on.

use std::time::Duration;

use super::offline::{known_digest, offline, records};
use super::verification::{refused, verification_policy};
use super::{Fetched, Origin, hex_of, names};
use crate::api::conditions::Desired;
use crate::api::providermodule::OciSource;
use crate::api::{ConditionType, ProviderModule, Reason};
use crate::controllers::context::Context;
use crate::controllers::credentials::allowed_secret;
use crate::controllers::error::Error;
use crate::controllers::outcome::Wait;
use crate::controllers::providermodule::FETCH_RETRY;
use crate::controllers::reconciler::Scope;
use crate::oci::{self, Auth, ImageRef, Policy, Record, Records, SignatureError};
use crate::wasm::ProviderSource;

/// How often a tag is resolved again when the module says nothing.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);
/// The `.dockerconfigjson` key of a pull Secret.
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// The component `oci` names, or why it cannot be had; says in
/// `SourceAvailable` whether the registry answered.
pub(in crate::controllers::providermodule) async fn fetch(
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
    let policy = match verification_policy(ctx, &name, spec).await? {
        Ok(policy) => policy,
        Err(wait) => return Ok(Err(wait)),
    };
    let records = records(ctx);
    let refresh = image.digest().is_none().then(|| {
        oci.interval_seconds
            .map_or(DEFAULT_INTERVAL, |s| Duration::from_secs(u64::from(s)))
    });

    match online(ctx, &image, &auth, &policy, records.as_ref(), refresh).await {
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
                &policy,
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
    policy: &Policy,
    records: Option<&Records>,
    refresh: Option<Duration>,
) -> Result<Fetched, Miss> {
    let session = ctx.settings.oci.session(image, auth)?;
    let digest = session.digest().await?;
    let signed = if policy.is_empty() {
        Vec::new()
    } else {
        match oci::verify_signature(&session, &digest, policy).await {
            Ok(signed) => signed,
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
        signed_by: names(&signed),
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
