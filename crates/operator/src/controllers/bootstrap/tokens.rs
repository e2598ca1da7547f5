//! Bootstrap tokens the host owns, for providers that import
//! `bootstrap-tokens` (kubeadm joins): made in the workload cluster as
//! kubeadm makes them (a `bootstrap.kubernetes.io/token` Secret in
//! `kube-system`), handed to the guest with the call, never stored in the
//! management cluster (the data Secret names the token's public id and its
//! expiration, not its secret). While the config's pool still has machines
//! to join, the token is extended (as upstream's kubeadm provider refreshes
//! an unused token); once every machine has joined it is left to expire and
//! then deleted; a pool that scales later gets a new token and new data. A
//! token Secret gone while machines still have to join (deleted by hand) is
//! replaced the same way, with a Warning: the token is the host's, so there
//! is nothing for a person to fix, only something to know.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;

use super::CONTROLLER;
use crate::api::{MachinePool, Reason, WasmBootstrapConfig};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;
use crate::wasm::bootstrap_tokens::BootstrapToken;
use crate::workload::{self, ClusterKey};

/// On the data Secret: the public id of the host's token its data holds.
pub const TOKEN_ID_ANNOTATION: &str = "bootstrap.capwasm.dev/token-id";
/// On the data Secret: when that token expires (RFC 3339), as last set.
pub const TOKEN_EXPIRATION_ANNOTATION: &str = "bootstrap.capwasm.dev/token-expiration";
/// On the data Secret: the replicas of the pool the bootstrap controller
/// last found the token good for (there, unexpired). The WasmMachinePool
/// adds machines only up to that many, so that no machine boots with a
/// token that expired or was deleted while the pool did not scale.
pub const TOKEN_REPLICAS_ANNOTATION: &str = "bootstrap.capwasm.dev/token-replicas";
/// On a token Secret in the workload cluster: the UID of the config it was
/// made for, so that its expired tokens can be found and deleted.
pub const CONFIG_UID_LABEL: &str = "bootstrap.capwasm.dev/config-uid";

/// Where kube-apiserver's bootstrap authenticator reads token Secrets.
const TOKEN_NAMESPACE: &str = "kube-system";
/// The type kube-apiserver's bootstrap authenticator reads.
const TOKEN_SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The group `kubeadm join` relies on (kubeadm's default node token's).
const EXTRA_GROUPS: &str = "system:bootstrappers:kubeadm:default-node-token";

/// A token the host made: what the guest gets, and when it expires.
#[derive(Clone)]
pub struct Issued {
    /// The token (its secret part is a credential: never logged).
    pub token: BootstrapToken,
    /// When it expires.
    pub expires: Timestamp,
    /// The UID of its Secret, which only this Secret can be deleted by.
    pub uid: Option<String>,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("id", &self.token.id)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

/// The name of token `id`'s Secret, as kubeadm names it.
pub fn secret_name(id: &str) -> String {
    format!("bootstrap-token-{id}")
}

/// Whether the pool still has machines to join: more wanted than have a
/// Node (upstream keeps an unused token alive on the same grounds).
pub fn machines_to_join(pool: &MachinePool) -> bool {
    let joined = pool.status.as_ref().map_or(0, |s| s.node_refs.len());
    usize::try_from(pool.desired_replicas()).unwrap_or(0) > joined
}

/// `len` characters of `[a-z0-9]`, uniformly, from the OS's generator.
fn random_chars(len: usize) -> Result<String, getrandom::Error> {
    const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::with_capacity(len);
    let mut bytes = [0_u8; 32];
    while out.len() < len {
        getrandom::fill(&mut bytes)?;
        // 252 = 7 × 36: rejecting the rest keeps every character equally likely.
        for b in bytes.iter().filter(|b| **b < 252) {
            if out.len() == len {
                break;
            }
            out.push(char::from(ALPHABET[usize::from(*b % 36)]));
        }
    }
    Ok(out)
}

/// `at`, to the second, as kubeadm writes expirations (RFC 3339, UTC).
fn rfc3339(at: Timestamp) -> String {
    Timestamp::from_second(at.as_second())
        .unwrap_or(at)
        .to_string()
}

fn after(now: Timestamp, ttl: Duration) -> Timestamp {
    now.checked_add(SignedDuration::try_from(ttl).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX)
}

/// The expiration a token Secret says, if it says one that parses.
fn expiration(secret: &Secret) -> Option<Timestamp> {
    let value = secret.data.as_ref()?.get("expiration")?;
    std::str::from_utf8(&value.0).ok()?.parse().ok()
}

fn write_error(what: &'static str, name: String, source: kube::Error) -> Error {
    Error::Write { what, name, source }
}

/// Makes a token for `config` in the workload cluster, valid for `ttl`.
pub async fn issue(
    client: &Client,
    config: &WasmBootstrapConfig,
    ttl: Duration,
) -> Result<Issued, Error> {
    let random = |len| {
        random_chars(len).map_err(|e| {
            write_error(
                "bootstrap token Secret",
                config.name_any(),
                kube::Error::Service(Box::new(std::io::Error::other(e.to_string()))),
            )
        })
    };
    let (id, secret) = (random(6)?, random(16)?);
    let expires = after(Timestamp::now(), ttl);
    let name = secret_name(&id);
    let data: BTreeMap<String, ByteString> = [
        ("token-id", id.clone()),
        ("token-secret", secret.clone()),
        ("expiration", rfc3339(expires)),
        ("usage-bootstrap-authentication", "true".to_owned()),
        ("usage-bootstrap-signing", "true".to_owned()),
        ("auth-extra-groups", EXTRA_GROUPS.to_owned()),
        (
            "description",
            format!(
                "made by capwasm for WasmBootstrapConfig {}/{}",
                config.namespace().unwrap_or_default(),
                config.name_any()
            ),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
    .collect();
    let mut object = Secret {
        data: Some(data),
        type_: Some(TOKEN_SECRET_TYPE.to_owned()),
        ..Secret::default()
    };
    object.metadata.name = Some(name.clone());
    object.metadata.namespace = Some(TOKEN_NAMESPACE.to_owned());
    object.metadata.labels = Some(BTreeMap::from([(
        CONFIG_UID_LABEL.to_owned(),
        config.uid().unwrap_or_default(),
    )]));
    let created = Api::<Secret>::namespaced(client.clone(), TOKEN_NAMESPACE)
        .create(&PostParams::default(), &object)
        .await
        .map_err(|source| write_error("bootstrap token Secret", name, source))?;
    tracing::info!(token_id = %id, expires = %expires, "made a bootstrap token in the workload cluster");
    Ok(Issued {
        token: BootstrapToken {
            id,
            secret,
            expiration: rfc3339(expires),
        },
        expires,
        uid: created.uid(),
    })
}

/// Deletes token Secret `name`, and only the one of UID `uid`: a Secret
/// made again under its name by someone else stays. Gone already is as
/// good; whether this call deleted it.
pub async fn delete(client: &Client, name: &str, uid: Option<String>) -> Result<bool, Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match Api::<Secret>::namespaced(client.clone(), TOKEN_NAMESPACE)
        .delete(name, &params)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
        Err(source) => Err(write_error(
            "bootstrap token Secret",
            name.to_owned(),
            source,
        )),
    }
}

/// The workload cluster's client, or none while it has no kubeconfig
/// Secret (a provider then gets no token, and uses its config's).
pub async fn workload_client(ctx: &Context, pool: &MachinePool) -> Result<Option<Client>, Error> {
    let key = ClusterKey::new(
        pool.namespace().unwrap_or_default(),
        &pool.spec.cluster_name,
    );
    match ctx.workload.client(&key).await {
        Ok(client) => Ok(Some(client)),
        Err(workload::Error::KubeconfigSecretNotFound { .. }) => Ok(None),
        Err(source) => Err(Error::Workload(key.to_string(), source)),
    }
}

/// Token `id`'s Secret as the sweep found it: when it expires, its UID.
type Current = (Timestamp, Option<String>);

/// Deletes the expired tokens made for config `uid` — Secrets labelled for
/// it, of a token's type and named for the token they hold —
/// (kube-controller-manager's token cleaner would too, where it runs);
/// returns when token `id` expires if it is there unexpired, and the
/// soonest expiry of all that are.
async fn sweep(
    ctx: &Context,
    client: &Client,
    uid: &str,
    id: &str,
    now: Timestamp,
) -> Result<(Option<Current>, Option<Timestamp>), Error> {
    let tokens = Api::<Secret>::namespaced(client.clone(), TOKEN_NAMESPACE)
        .list(&ListParams::default().labels(&format!("{CONFIG_UID_LABEL}={uid}")))
        .await
        .map_err(|source| Error::Get {
            kind: "bootstrap token Secrets",
            name: uid.to_owned(),
            source,
        })?;
    let mut current = None;
    let mut next_expiry: Option<Timestamp> = None;
    for token in &tokens.items {
        let token_id = token
            .data
            .as_ref()
            .and_then(|d| d.get("token-id"))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .unwrap_or_default();
        // The label is anyone's to set: only a Secret shaped as the host
        // makes its tokens (their type, named for the token its data
        // holds) is looked after or deleted; any other is left alone.
        if token.type_.as_deref() != Some(TOKEN_SECRET_TYPE)
            || token.name_any() != secret_name(&token_id)
        {
            continue;
        }
        match expiration(token) {
            Some(at) if at > now => {
                next_expiry = Some(next_expiry.map_or(at, |n| n.min(at)));
                if token_id == id {
                    current = Some((at, token.uid()));
                }
            }
            _ => {
                // The listed Secret itself, by its UID: not one made again
                // under its name since.
                ctx.metrics.write(CONTROLLER, "bootstrap-token");
                if delete(client, &token.name_any(), token.uid()).await? {
                    tracing::info!(token_id = %token_id, "deleted an expired bootstrap token");
                }
            }
        }
    }
    Ok((current, next_expiry))
}

/// Keeps the token of existing data alive while the pool has machines to
/// join, and asks for new data (clearing `found.done`) when that token is
/// gone or expired; deletes the config's expired tokens; comes back before
/// the next thing to do (a refresh, an expiry).
pub async fn maintain(
    scope: &mut Scope<WasmBootstrapConfig>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let (Some(pool), Some(_)) = (scope.found.pool.clone(), &scope.found.done) else {
        return Ok(Outcome::Continue);
    };
    let name = scope.object.name_any();
    let meta = ctx.secret_metadata(&scope.namespace(), &name).await?;
    let recorded = meta.map(|m| m.annotations().clone()).unwrap_or_default();
    let Some(id) = recorded.get(TOKEN_ID_ANNOTATION).cloned() else {
        // The data holds no token of the host's: nothing to look after.
        return Ok(Outcome::Continue);
    };
    let Some(client) = workload_client(ctx, &pool).await? else {
        return Ok(Outcome::Continue);
    };
    let ttl = ctx.settings.bootstrap_token_ttl;
    let now = Timestamp::now();
    let api: Api<Secret> = Api::namespaced(client.clone(), TOKEN_NAMESPACE);
    let uid = scope.object.uid().unwrap_or_default();
    let (current, next_expiry) = sweep(ctx, &client, &uid, &id, now).await?;
    if !machines_to_join(&pool) {
        // Every machine joined: the token is left to expire.
        return Ok(next_expiry.map_or(Outcome::Continue, |at| {
            Outcome::RequeueAfter(until(now, at) + Duration::from_secs(1))
        }));
    }
    let Some((expires, uid)) = current else {
        let recorded_expiry = recorded
            .get(TOKEN_EXPIRATION_ANNOTATION)
            .and_then(|v| v.parse::<Timestamp>().ok());
        let (reason, note) = if recorded_expiry.is_some_and(|at| at > now) {
            (
                Reason::BootstrapTokenMissing,
                format!(
                    "bootstrap token {id} was deleted from the workload cluster while machines still have to join; making a new one and new bootstrap data"
                ),
            )
        } else {
            (
                Reason::BootstrapTokenRenewed,
                format!(
                    "bootstrap token {id} expired and the pool has machines to join; making a new one and new bootstrap data"
                ),
            )
        };
        ctx.publish(&scope.reference(), reason, note).await;
        scope.found.done = None;
        return Ok(Outcome::Continue);
    };
    // Extended once less than 5/6 of the TTL is left, and looked at every
    // third of it: two chances to extend before it expires (upstream's
    // kubeadm provider's rhythm).
    let refresh_before = after(now, ttl.mul_f64(5.0 / 6.0));
    let mut annotations = serde_json::Map::new();
    if expires < refresh_before {
        let extended = after(now, ttl);
        let expiration = ByteString(rfc3339(extended).into_bytes());
        api.patch(
            &secret_name(&id),
            &PatchParams::default(),
            // The uid makes the patch fail on any Secret but the one swept.
            &Patch::Merge(json!({
                "metadata": { "uid": uid },
                "data": { "expiration": expiration },
            })),
        )
        .await
        .map_err(|source| write_error("bootstrap token Secret", secret_name(&id), source))?;
        ctx.metrics.write(CONTROLLER, "bootstrap-token");
        tracing::debug!(token_id = %id, expires = %extended, "extended the bootstrap token: machines still have to join");
        annotations.insert(TOKEN_EXPIRATION_ANNOTATION.into(), rfc3339(extended).into());
    }
    let replicas = pool.desired_replicas().to_string();
    if recorded.get(TOKEN_REPLICAS_ANNOTATION) != Some(&replicas) {
        annotations.insert(TOKEN_REPLICAS_ANNOTATION.into(), replicas.into());
    }
    if !annotations.is_empty() {
        Api::<Secret>::namespaced(ctx.client.clone(), &scope.namespace())
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "annotations": annotations } })),
            )
            .await
            .map_err(|source| write_error("bootstrap data Secret", name.clone(), source))?;
        ctx.metrics.write(CONTROLLER, "secret");
    }
    Ok(Outcome::RequeueAfter(ttl / 3))
}

fn until(now: Timestamp, at: Timestamp) -> Duration {
    Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO)
}

/// Whether machines may be added to a pool of `replicas` with bootstrap
/// data annotated with `annotations`: yes unless the data holds a host
/// token that expired, or that the bootstrap controller has not yet found
/// good for that many replicas.
pub fn fit_for(annotations: &BTreeMap<String, String>, replicas: i32, now: Timestamp) -> bool {
    if !annotations.contains_key(TOKEN_ID_ANNOTATION) {
        return true;
    }
    let unexpired = annotations
        .get(TOKEN_EXPIRATION_ANNOTATION)
        .and_then(|v| v.parse::<Timestamp>().ok())
        .is_some_and(|at| at > now);
    let confirmed = annotations
        .get(TOKEN_REPLICAS_ANNOTATION)
        .and_then(|v| v.parse::<i32>().ok())
        .is_some_and(|r| r >= replicas);
    unexpired && confirmed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_chars_are_of_the_token_alphabet_and_length() {
        let id = random_chars(6).unwrap();
        let secret = random_chars(16).unwrap();
        assert_eq!((id.len(), secret.len()), (6, 16));
        assert!(
            format!("{id}{secret}")
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
    }

    #[test]
    fn expirations_are_written_to_the_second_in_utc() {
        let at: Timestamp = "2026-11-28T14:00:00.75Z".parse().unwrap();
        assert_eq!(rfc3339(at), "2026-11-28T14:00:00Z");
    }

    #[test]
    fn data_is_fit_for_new_machines_only_with_a_live_confirmed_token() {
        let now: Timestamp = "2026-11-28T14:00:00Z".parse().unwrap();
        let cases = [
            ("no host token", None, "", "", 3, true),
            (
                "unexpired and confirmed",
                Some("abcdef"),
                "2026-11-28T14:00:01Z",
                "3",
                3,
                true,
            ),
            (
                "expired",
                Some("abcdef"),
                "2026-11-28T13:59:59Z",
                "3",
                3,
                false,
            ),
            (
                "not confirmed for the new size",
                Some("abcdef"),
                "2026-11-28T14:00:01Z",
                "2",
                3,
                false,
            ),
            ("nothing recorded", Some("abcdef"), "", "", 1, false),
        ];
        for (case, id, expiration, confirmed, replicas, fit) in cases {
            let mut annotations = BTreeMap::new();
            if let Some(id) = id {
                annotations.insert(TOKEN_ID_ANNOTATION.to_owned(), id.to_owned());
            }
            for (key, value) in [
                (TOKEN_EXPIRATION_ANNOTATION, expiration),
                (TOKEN_REPLICAS_ANNOTATION, confirmed),
            ] {
                if !value.is_empty() {
                    annotations.insert(key.to_owned(), value.to_owned());
                }
            }
            assert_eq!(fit_for(&annotations, replicas, now), fit, "{case}");
        }
    }
}
