//! What a ProviderModule grants its provider (hosts, and how the host
//! authenticates requests to them), and its credentials, read for a call
//! or checked for the module: from the Secret it names, in the namespace the operator may read
//! them from, holding every key its `requestAuth` rules read. What is
//! missing is a wait that names the Secret and the key, never a value.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::api::Reason;
use crate::api::providermodule::{ProviderModuleSpec, RequestAuth};
use crate::wasm::{
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, Capabilities, HostAuth, Keys, ObjectKind, Scheme,
    types,
};

use super::context::Context;
use super::error::Error;
use super::outcome::Wait;

/// How soon to look again for a credentials Secret, or a key of one, that
/// is not there (credentials Secrets are not watched).
pub const CREDENTIALS_POLL: Duration = Duration::from_secs(30);

/// The entries of module `name`'s credentials Secret (none if it names
/// none), or why they cannot be had yet.
pub async fn read(
    ctx: &Context,
    name: &str,
    spec: &ProviderModuleSpec,
) -> Result<Result<Vec<types::Credential>, Wait>, Error> {
    let Some(secret) = spec
        .capabilities
        .as_ref()
        .and_then(|c| c.credentials_secret.as_ref())
    else {
        return Ok(Ok(Vec::new()));
    };
    let found = match allowed_secret(
        ctx,
        name,
        "credentials Secret",
        &secret.namespace,
        &secret.name,
    )
    .await?
    {
        Ok(found) => found,
        Err(wait) => return Ok(Err(wait)),
    };
    let (namespace, secret_name) = (&secret.namespace, &secret.name);
    let credentials: Vec<types::Credential> = found
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| types::Credential {
            key,
            value: value.0,
        })
        .collect();
    let keys = Keys::new(credentials.clone());
    let missing: Vec<String> = capabilities(spec)
        .request_auth
        .iter()
        .flat_map(|rule| {
            rule.missing(&keys)
                .into_iter()
                .map(|key| format!("{key:?} (requestAuth for {})", rule.host))
                .collect::<Vec<_>>()
        })
        .collect();
    if !missing.is_empty() {
        return Ok(Err(Wait::after(
            Reason::CredentialsKeyMissing,
            format!(
                "the credentials Secret {namespace}/{secret_name} of ProviderModule {name:?} has no key {}",
                missing.join(", ")
            ),
            CREDENTIALS_POLL,
        )));
    }
    Ok(Ok(credentials))
}

/// Why module `name` may not read its `what` `namespace/object` (a Secret,
/// a ConfigMap of keys or code): it is not in the namespace credentials
/// are read from.
pub fn credentials_namespace(
    ctx: &Context,
    name: &str,
    what: &str,
    namespace: &str,
    object: &str,
) -> Option<Wait> {
    let allowed = ctx.settings.credentials_namespace.as_ref()?;
    (allowed != namespace).then(|| {
        Wait::on_change(
            Reason::CredentialsNotAllowed,
            format!(
                "ProviderModule {name:?} names the {what} {namespace}/{object}, but credentials are read only from namespace {allowed:?} (so are verification keys, and components sha256 does not pin)"
            ),
        )
    })
}

/// The Secret `namespace/secret_name` that module `name` names as its
/// `what`, if it is in the namespace credentials are read from and exists.
pub async fn allowed_secret(
    ctx: &Context,
    name: &str,
    what: &str,
    namespace: &str,
    secret_name: &str,
) -> Result<Result<Secret, Wait>, Error> {
    if let Some(wait) = credentials_namespace(ctx, name, what, namespace, secret_name) {
        return Ok(Err(wait));
    }
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let found = api
        .get_opt(secret_name)
        .await
        .map_err(|source| Error::Get {
            kind: "Secret",
            name: secret_name.to_owned(),
            source,
        })?;
    Ok(found.ok_or_else(|| {
        Wait::after(
            Reason::CredentialsNotFound,
            format!(
                "the {what} {namespace}/{secret_name} of ProviderModule {name:?} does not exist"
            ),
            CREDENTIALS_POLL,
        )
    }))
}

/// What `spec` grants, as the runtime applies it.
pub fn capabilities(spec: &ProviderModuleSpec) -> Capabilities {
    let Some(granted) = spec.capabilities.as_ref() else {
        return Capabilities::default();
    };
    Capabilities {
        allowed_hosts: granted.allowed_hosts.clone(),
        request_auth: granted.request_auth.iter().filter_map(host_auth).collect(),
        expose_credentials: granted.expose_credentials_to_guest,
        allowed_kinds: granted
            .allowed_kinds
            .iter()
            .map(|k| ObjectKind {
                group: k.group.clone(),
                kind: k.kind.clone(),
            })
            .collect(),
    }
}

/// A rule as the runtime applies it; `None` for one naming no scheme
/// (the API server refuses those).
fn host_auth(rule: &RequestAuth) -> Option<HostAuth> {
    let scheme = match (&rule.aws_sig_v4, &rule.bearer) {
        (Some(sigv4), _) => Scheme::AwsSigV4 {
            service: sigv4.service.clone(),
            region: sigv4.region.clone(),
            access_key_id: sigv4
                .access_key_id_key
                .clone()
                .unwrap_or_else(|| AWS_ACCESS_KEY_ID.into()),
            secret_access_key: sigv4
                .secret_access_key_key
                .clone()
                .unwrap_or_else(|| AWS_SECRET_ACCESS_KEY.into()),
            session_token: sigv4.session_token_key.clone(),
        },
        (None, Some(bearer)) => Scheme::Bearer {
            token: bearer.token_key.clone(),
        },
        (None, None) => return None,
    };
    Some(HostAuth {
        host: rule.host.clone(),
        plain_http: rule.plain_http,
        scheme,
    })
}
