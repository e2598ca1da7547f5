//! A module's verification policy, each of its keys read from its PEM,
//! Secret or ConfigMap and parsed, and the condition of an image its
//! signatures (or a key) do not admit. Apart because reading keys is its
//! own walk through the objects the module may read, and each way it fails
//! has its own reason.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::api::Reason;
use crate::api::providermodule::{KeySelector, ProviderModuleSpec, PublicKeySource};
use crate::controllers::context::Context;
use crate::controllers::credentials::{allowed_secret, credentials_namespace};
use crate::controllers::error::Error;
use crate::controllers::outcome::Wait;
use crate::controllers::providermodule::FETCH_RETRY;
use crate::oci::{Policy, PublicKey, SignatureError};

/// The key read from a Secret or ConfigMap that names none.
const DEFAULT_KEY: &str = "cosign.pub";

/// The condition of an image its signatures do not admit.
pub(super) fn refused(error: &SignatureError) -> Wait {
    let reason = match error {
        SignatureError::Key { .. } => Reason::VerificationKeyInvalid,
        SignatureError::NotSigned { .. } => Reason::SignatureNotFound,
        SignatureError::Unsatisfied { .. } => Reason::SignatureUntrusted,
        SignatureError::Malformed { .. } => Reason::SignatureMalformed,
        SignatureError::DigestMismatch { .. } => Reason::SignatureDigestMismatch,
        SignatureError::RepositoryMismatch { .. } => Reason::SignatureRepositoryMismatch,
        SignatureError::Fetch { .. } => Reason::FetchFailed,
    };
    Wait::after(reason, crate::report::error_chain(error), FETCH_RETRY)
}

/// The module's verification policy, each of its keys read and parsed;
/// an empty policy when it asks for no signature.
pub(super) async fn verification_policy(
    ctx: &Context,
    name: &str,
    spec: &ProviderModuleSpec,
) -> Result<Result<Policy, Wait>, Error> {
    let Some(verification) = &spec.verification else {
        return Ok(Ok(Policy::default()));
    };
    let (any_of, minimum) = verification.any_of();
    let any_field = if verification.any_of.is_some() {
        "anyOf.publicKeys"
    } else {
        "publicKeys"
    };
    let all = match read_keys(ctx, name, "allOf", &verification.all_of).await? {
        Ok(keys) => keys,
        Err(wait) => return Ok(Err(wait)),
    };
    let any = match read_keys(ctx, name, any_field, any_of).await? {
        Ok(keys) => keys,
        Err(wait) => return Ok(Err(wait)),
    };
    let minimum = usize::try_from(minimum).unwrap_or(usize::MAX);
    Ok(Ok(Policy::new(all, any, minimum)))
}

/// The keys of `sources` (the spec's `field`), each read and parsed.
async fn read_keys(
    ctx: &Context,
    name: &str,
    field: &str,
    sources: &[PublicKeySource],
) -> Result<Result<Vec<PublicKey>, Wait>, Error> {
    let mut keys = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        let (key_name, pem) = match key_pem(ctx, name, &format!("{field}[{i}]"), source).await? {
            Ok(found) => found,
            Err(wait) => return Ok(Err(wait)),
        };
        let key_name = source.name.clone().unwrap_or(key_name);
        match PublicKey::from_pem(key_name, &pem) {
            Ok(key) => keys.push(key),
            Err(error) => return Ok(Err(refused(&error))),
        }
    }
    Ok(Ok(keys))
}

/// Key `field`'s name in messages and its PEM.
async fn key_pem(
    ctx: &Context,
    name: &str,
    field: &str,
    source: &PublicKeySource,
) -> Result<Result<(String, String), Wait>, Error> {
    let key_of = |selector: &KeySelector| selector.key.as_deref().unwrap_or(DEFAULT_KEY).to_owned();
    let missing = |kind: &str, selector: &KeySelector| {
        Wait::after(
            Reason::VerificationKeyInvalid,
            format!(
                "the {kind} {}/{} has no key {:?} (verification key {field})",
                selector.namespace,
                selector.name,
                key_of(selector)
            ),
            FETCH_RETRY,
        )
    };
    if let Some(pem) = &source.pem {
        return Ok(Ok((field.to_owned(), pem.clone())));
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
        format!("verification key {field} names no pem, secret or configMap"),
    )))
}
