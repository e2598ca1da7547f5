//! The cluster's certificates, which the host owns: the cluster CA
//! (`<cluster>-ca`), etcd's (`-etcd`), the front proxy's (`-proxy`) and the
//! service-account key pair (`-sa`), as Cluster API names and shapes them
//! (`tls.crt`, `tls.key`; `-sa` holds the public key in `tls.crt`). Made
//! once, before the provider is first called, each owned by the control
//! plane; one the user made already is used as it is. A guest is told
//! their names and the CA's certificate, never a key.
//!
//! Once the control plane has come up, a missing one is not made again:
//! every node and client trusts the old CA, so a new one would break the
//! cluster. The control plane waits with `CertificatesLost` instead.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::{Api, ResourceExt as _};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

use crate::api::{CLUSTER_SECRET_TYPE, Reason, WasmControlPlane, labels};
use crate::controllers::context::Context;
use crate::controllers::error::{Error, KindError};
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::Scope;
use crate::wasm::control_planes::ClusterCertificates;

/// The certificate authorities: Secret suffix and the CA's common name (kubeadm's).
const AUTHORITIES: [(&str, &str); 3] = [
    ("ca", "kubernetes"),
    ("etcd", "etcd-ca"),
    ("proxy", "front-proxy-ca"),
];
/// The service-account signing key pair's Secret suffix.
const SERVICE_ACCOUNT: &str = "sa";
/// How long the CAs are valid, as kubeadm makes them: ten years.
const CA_YEARS: i32 = 10;

/// Finds or makes the cluster's certificate Secrets; the names and the CA
/// certificate the provider is given, in `found`.
pub(super) async fn ensure(
    scope: &mut Scope<WasmControlPlane>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let Some(cluster) = scope.cluster.as_ref().map(|c| c.name_any()) else {
        return Ok(Outcome::Continue);
    };
    let namespace = scope.namespace();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let names: Vec<String> = AUTHORITIES
        .iter()
        .map(|(suffix, _)| *suffix)
        .chain([SERVICE_ACCOUNT])
        .map(|suffix| format!("{cluster}-{suffix}"))
        .collect();
    let mut missing = Vec::new();
    for name in &names {
        if ctx.secret_metadata(&namespace, name).await?.is_none() {
            missing.push(name.clone());
        }
    }
    if !missing.is_empty() {
        if super::initialized(scope) {
            let message = format!(
                "Secret {} of a control plane that has come up is gone: made anew it would break every node and client that trusts the old one; restore it from a backup, or delete the cluster",
                missing.join(", ")
            );
            return Ok(Outcome::Wait(Wait::on_change(
                Reason::CertificatesLost,
                message,
            )));
        }
        for name in &missing {
            create(scope, ctx, &secrets, &cluster, name).await?;
        }
        scope
            .publish(
                ctx,
                Reason::CertificatesGenerated,
                format!("made {}", missing.join(", ")),
            )
            .await;
    }
    let ca_name = &names[0];
    // Read once per version of the Secret, not once per reconcile.
    let ca = ctx
        .secret_data(&namespace, ca_name)
        .await?
        .and_then(|data| String::from_utf8(data.get("tls.crt")?.0.clone()).ok())
        .ok_or_else(|| CertificateError::NoCaCertificate(ca_name.clone()))?;
    scope.found.certificates = Some(named(namespace, &cluster, ca));
    Ok(Outcome::Continue)
}

/// The certificates of `cluster` in `namespace` as a call names them.
pub(super) fn named(
    namespace: String,
    cluster: &str,
    ca_certificate: String,
) -> ClusterCertificates {
    let name = |suffix: &str| format!("{cluster}-{suffix}");
    ClusterCertificates {
        namespace,
        ca: name(AUTHORITIES[0].0),
        etcd: name(AUTHORITIES[1].0),
        front_proxy: name(AUTHORITIES[2].0),
        service_account: name(SERVICE_ACCOUNT),
        ca_certificate,
    }
}

/// Creates Secret `name` of `cluster` (one made meanwhile stands).
async fn create(
    scope: &Scope<WasmControlPlane>,
    ctx: &Context,
    secrets: &Api<Secret>,
    cluster: &str,
    name: &str,
) -> Result<(), Error> {
    let suffix = name.rsplit('-').next().unwrap_or_default();
    let data = match AUTHORITIES.iter().find(|(s, _)| *s == suffix) {
        Some((_, common_name)) => authority(common_name)?,
        None => service_account()?,
    };
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(scope.namespace()),
            labels: Some(BTreeMap::from([(
                labels::CLUSTER_NAME.to_owned(),
                cluster.to_owned(),
            )])),
            owner_references: Some(vec![scope.controller_reference()]),
            ..kube::api::ObjectMeta::default()
        },
        type_: Some(CLUSTER_SECRET_TYPE.to_owned()),
        data: Some(data),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            ctx.metrics.write(super::CONTROLLER, "certificates");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(Error::Write {
            what: "Secret",
            name: name.to_owned(),
            source,
        }),
    }
}

fn pem_data(certificate: String, key: String) -> BTreeMap<String, ByteString> {
    BTreeMap::from([
        ("tls.crt".to_owned(), ByteString(certificate.into_bytes())),
        ("tls.key".to_owned(), ByteString(key.into_bytes())),
    ])
}

/// A self-signed CA named `common_name`, valid [`CA_YEARS`] from today.
fn authority(common_name: &str) -> Result<BTreeMap<String, ByteString>, CertificateError> {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::CrlSign,
    ];
    crate::workload::generated::valid_for_years(&mut params, CA_YEARS);
    let key = KeyPair::generate().map_err(CertificateError::Generate)?;
    let certificate = params
        .self_signed(&key)
        .map_err(CertificateError::Generate)?;
    Ok(pem_data(certificate.pem(), key.serialize_pem()))
}

/// The service-account signing key pair: its public key in `tls.crt`.
fn service_account() -> Result<BTreeMap<String, ByteString>, CertificateError> {
    let key = KeyPair::generate().map_err(CertificateError::Generate)?;
    Ok(pem_data(key.public_key_pem(), key.serialize_pem()))
}

/// The cluster's certificates could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// Generating a key or certificate failed.
    #[error("cannot generate the cluster's certificates")]
    Generate(#[source] rcgen::Error),
    /// The CA Secret holds no PEM certificate.
    #[error("Secret {0:?} holds no PEM tls.crt")]
    NoCaCertificate(String),
}

impl KindError for CertificateError {
    fn reason(&self) -> Reason {
        Reason::CertificatesInvalid
    }

    fn metric_label(&self) -> &'static str {
        "certificates"
    }
}
