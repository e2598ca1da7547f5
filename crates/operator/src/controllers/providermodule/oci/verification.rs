//! A module's verification policy, each of its keys read from its PEM,
//! Secret or ConfigMap and parsed, and the condition of an image its
//! signatures (or a key) do not admit. Apart because reading keys is its
//! own walk through the objects the module may read, and each way it fails
//! has its own reason.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::api::Reason;
use crate::api::providermodule::{KeySelector, ProviderModuleSpec, Signer};
use crate::controllers::context::Context;
use crate::controllers::credentials::{allowed_secret, credentials_namespace};
use crate::controllers::error::Error;
use crate::controllers::outcome::Wait;
use crate::controllers::providermodule::FETCH_RETRY;
use crate::oci::{
    Identity, Policy, Provenance, PublicKey, SignatureError, Signer as OciSigner, Subject, Trust,
};

/// The key read from a Secret or ConfigMap that names none.
const DEFAULT_KEY: &str = "cosign.pub";
/// The key of a trust root's ConfigMap that names none.
const DEFAULT_TRUSTED_ROOT: &str = "trusted_root.json";

/// The condition of an image its signatures do not admit.
pub(super) fn refused(error: &SignatureError) -> Wait {
    let reason = match error {
        SignatureError::Key { .. } | SignatureError::TrustRoot { .. } => {
            Reason::VerificationKeyInvalid
        }
        SignatureError::NotSigned { .. } => Reason::SignatureNotFound,
        SignatureError::Unsatisfied { .. }
        | SignatureError::Untrusted { .. }
        | SignatureError::IdentityMismatch { .. } => Reason::SignatureUntrusted,
        SignatureError::Provenance { .. } => Reason::ProvenanceMismatch,
        SignatureError::Malformed { .. } => Reason::SignatureMalformed,
        SignatureError::DigestMismatch { .. } => Reason::SignatureDigestMismatch,
        SignatureError::RepositoryMismatch { .. } => Reason::SignatureRepositoryMismatch,
        SignatureError::Fetch { .. } => Reason::FetchFailed,
    };
    Wait::after(reason, crate::report::error_chain(error), FETCH_RETRY)
}

/// The module's verification policy, each of its keys read and parsed and
/// its trust root with them; an empty policy when it asks for no signature.
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
        "anyOf.signers"
    } else {
        "publicKeys"
    };
    let all = match read_signers(ctx, name, "allOf", &verification.all_of).await? {
        Ok(signers) => signers,
        Err(wait) => return Ok(Err(wait)),
    };
    let any = match read_signers(ctx, name, any_field, any_of).await? {
        Ok(signers) => signers,
        Err(wait) => return Ok(Err(wait)),
    };
    let trust = match trust_root(ctx, name, verification.trusted_root.as_ref()).await? {
        Ok(trust) => trust,
        Err(wait) => return Ok(Err(wait)),
    };
    let provenance = match &verification.provenance {
        None => None,
        Some(rule) => {
            let signer = match read_signers(
                ctx,
                name,
                "provenance.signer",
                std::slice::from_ref(&rule.signer),
            )
            .await?
            {
                Ok(mut signers) => signers.pop(),
                Err(wait) => return Ok(Err(wait)),
            };
            signer.map(|s| {
                Provenance::new(s, rule.builder_id.clone(), rule.source_repository.clone())
            })
        }
    };
    let keyless = all
        .iter()
        .chain(&any)
        .chain(provenance.iter().map(Provenance::signer))
        .find(|s| matches!(s, OciSigner::Keyless(_)));
    if let Some(signer) = keyless.filter(|_| trust.is_none()) {
        return Ok(Err(Wait::on_change(
            Reason::VerificationKeyInvalid,
            format!(
                "keyless signer {} needs a trust root: verification.trustedRoot, or the operator's --trusted-root",
                signer.name()
            ),
        )));
    }
    let minimum = usize::try_from(minimum).unwrap_or(usize::MAX);
    let policy = Policy::new(all, any, minimum, trust);
    Ok(Ok(match provenance {
        Some(provenance) => policy.with_provenance(provenance),
        None => policy,
    }))
}

/// The trust root `selector` names (a ConfigMap in the credentials
/// namespace), else the operator's.
async fn trust_root(
    ctx: &Context,
    name: &str,
    selector: Option<&KeySelector>,
) -> Result<Result<Option<Arc<Trust>>, Wait>, Error> {
    let Some(selector) = selector else {
        return Ok(Ok(ctx.settings.trusted_root.clone()));
    };
    let (label, json) =
        match config_map_value(ctx, name, "trust root", selector, DEFAULT_TRUSTED_ROOT).await? {
            Ok(found) => found,
            Err(wait) => return Ok(Err(wait)),
        };
    Ok(Trust::from_json(label, &json)
        .map(|t| Some(Arc::new(t)))
        .map_err(|e| refused(&e)))
}

/// The signers of `sources` (the spec's `field`), each key read and parsed.
async fn read_signers(
    ctx: &Context,
    name: &str,
    field: &str,
    sources: &[Signer],
) -> Result<Result<Vec<OciSigner>, Wait>, Error> {
    let mut signers = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        if let Some(keyless) = &source.keyless {
            let subject = match (&keyless.subject, &keyless.subject_prefix) {
                (Some(subject), _) => Subject::Exact(subject.clone()),
                (None, Some(prefix)) => Subject::Prefix(prefix.clone()),
                (None, None) => {
                    return Ok(Err(Wait::on_change(
                        Reason::VerificationKeyInvalid,
                        format!("keyless signer {field}[{i}] names no subject or subjectPrefix"),
                    )));
                }
            };
            let identity = Identity::new(source.name.clone(), keyless.issuer.clone(), subject);
            signers.push(OciSigner::Keyless(identity));
            continue;
        }
        let (key_name, pem) = match key_pem(ctx, name, &format!("{field}[{i}]"), source).await? {
            Ok(found) => found,
            Err(wait) => return Ok(Err(wait)),
        };
        let key_name = source.name.clone().unwrap_or(key_name);
        match PublicKey::from_pem(key_name, &pem) {
            Ok(key) => signers.push(OciSigner::Key(key)),
            Err(error) => return Ok(Err(refused(&error))),
        }
    }
    Ok(Ok(signers))
}

/// Key `field`'s name in messages and its PEM.
async fn key_pem(
    ctx: &Context,
    name: &str,
    field: &str,
    source: &Signer,
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
        let what = format!("verification key {field}");
        return config_map_value(ctx, name, &what, selector, DEFAULT_KEY).await;
    }
    Ok(Err(Wait::on_change(
        Reason::VerificationKeyInvalid,
        format!("verification key {field} names no pem, secret, configMap or keyless"),
    )))
}

/// `selector`'s value (its key, else `default_key`) of a ConfigMap in the
/// credentials namespace, with its name in messages; for `what`.
async fn config_map_value(
    ctx: &Context,
    name: &str,
    what: &str,
    selector: &KeySelector,
    default_key: &str,
) -> Result<Result<(String, String), Wait>, Error> {
    if let Some(wait) = credentials_namespace(
        ctx,
        name,
        &format!("{what} ConfigMap"),
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
    let key = selector.key.as_deref().unwrap_or(default_key);
    Ok(found
        .and_then(|c| c.data)
        .and_then(|mut d| d.remove(key))
        .map(|value| {
            (
                format!("ConfigMap {}/{}[{key}]", selector.namespace, selector.name),
                value,
            )
        })
        .ok_or_else(|| {
            Wait::after(
                Reason::VerificationKeyInvalid,
                format!(
                    "the ConfigMap {}/{} has no key {key:?} ({what})",
                    selector.namespace, selector.name
                ),
                FETCH_RETRY,
            )
        }))
}
