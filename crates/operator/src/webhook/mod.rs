//! The conversion webhook of capwasm's own Cluster and MachinePool CRDs,
//! which serve `cluster.x-k8s.io/v1beta1` beside the v1beta2 storage
//! version: an HTTPS server the API server calls with ConversionReviews
//! (`/convert`), its certificate kept in a Secret every replica shares, and
//! the CRDs pointed at it with that certificate's CA.
//!
//! Only standalone mode serves it; beside upstream Cluster API, upstream's
//! CRDs and webhook serve v1beta1.
//!
//! The certificate is renewed before it expires, by any replica, and served
//! by all of them from their next TLS handshake on ([`rotation`]).
//!
//! The same server judges PlatformCluster template changes before they are
//! stored (`/validate-platformcluster`, [`admission`]), registered as a
//! ValidatingWebhookConfiguration with the same CA.

pub mod admission;
pub mod bounds;
mod certs;
mod inject;
mod review;
mod rotation;
mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::reflector::Store;

use crate::api::ContractVersionedObjectReference;
use crate::api::v1beta1::{BoxError, convert};
use crate::controllers::external::resolve_in;

pub use admission::Admission;
pub use certs::{
    Certs, SETTLE, ServingCert, Settled, Stored, Validity, Wrote, generate as generate_cert, pems,
    serial_and_expiry,
};
pub use inject::{ADMISSION_CONFIGURATION, point_crds_at, register_admission};
pub use review::{Converter, review};
pub use server::{CertResolver, Limits, Server};

/// How long between two attempts when the certificate or the CRDs cannot be
/// written: the webhook is not served meanwhile, v1beta2 is unaffected.
const RETRY: Duration = Duration::from_secs(10);

/// Where and as what the webhook is served.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The address its HTTPS server listens on.
    pub bind: SocketAddr,
    /// The namespace of its certificate Secret and Service.
    pub namespace: String,
    /// The certificate Secret (`kubernetes.io/tls`, with `ca.crt`).
    pub secret: String,
    /// How the API server reaches it.
    pub endpoint: crate::api::WebhookClient,
    /// How long the certificates made are valid.
    pub validity: Validity,
}

/// Why the webhook is not served.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The certificate Secret could not be read or made.
    #[error("cannot read or create the webhook certificate Secret {namespace}/{name}")]
    Secret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The Secret holds no usable certificate and key.
    #[error(
        "the webhook certificate Secret {0} holds no usable tls.crt, tls.key and ca.crt (and ca.key)"
    )]
    InvalidSecret(String),
    /// Generating the certificate failed.
    #[error("cannot generate the webhook certificate")]
    Generate(#[source] rcgen::Error),
    /// TLS could not be set up with the certificate.
    #[error("cannot serve TLS with the webhook certificate")]
    Tls(#[source] rustls::Error),
    /// The address cannot be listened on.
    #[error("cannot listen on {0} (--webhook-bind-address)")]
    Bind(SocketAddr, #[source] std::io::Error),
    /// The admission webhook could not be registered.
    #[error("cannot register the ValidatingWebhookConfiguration {ADMISSION_CONFIGURATION}")]
    Admission(#[source] kube::Error),
    /// A CRD could not be pointed at the webhook.
    #[error("cannot point CRD {crd} at the conversion webhook")]
    Crd {
        /// The CRD.
        crd: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

/// Serves the webhook until the process ends: the certificate from its
/// Secret (made the first time), a cache of CRDs (a v1beta1 reference's
/// apiVersion is its kind's contract version), the HTTPS server, then the
/// certificate kept current ([`rotation`]: renewed when due, reloaded when
/// any replica renews it, the CRDs and the admission webhook's
/// configuration pointed at its CA). A step that fails is logged with its
/// cause and tried again, so the operator runs on with v1beta2 (and the
/// controller's judgement of template changes) while the webhook cannot be
/// served. `metrics` count the CRD watch's failures, what the server
/// refuses and the certificate's writes; `runtime` holds the platform
/// providers admission asks; `serving` holds once the server serves, its
/// CRD cache filled.
pub async fn run(
    client: kube::Client,
    settings: Settings,
    metrics: crate::controllers::Metrics,
    runtime: crate::wasm::Runtime,
    serving: crate::readiness::Check,
) {
    let certs = Certs::new(client.clone(), &settings, metrics.clone());
    let (settled, resolver) = loop {
        let found = certs.ensure().await.and_then(|settled| {
            let resolver = CertResolver::new(&settled.stored.served)?;
            Ok((settled, Arc::new(resolver)))
        });
        match found {
            Ok(found) => break found,
            Err(error) => not_serving(&error).await,
        }
    };
    let crds = crate::controllers::cache::crds(&client);
    let watching = tokio::spawn(crds.run(metrics.clone()));
    crds.ready().await;
    let convert = converter(crds.store().clone());
    let admission = Admission::new(client.clone(), runtime);
    let server = loop {
        let bound = Server::bind(
            settings.bind,
            Arc::clone(&resolver),
            convert.clone(),
            admission.clone(),
            Limits::default(),
            metrics.clone(),
        );
        match bound.await {
            Ok(server) => break server,
            Err(error) => not_serving(&error).await,
        }
    };
    tracing::info!(address = %server.address(), "serving the conversion webhook");
    serving.ready();
    let rotation = rotation::Rotation {
        certs,
        resolver,
        client,
        endpoint: settings.endpoint,
        metrics,
    };
    tokio::select! {
        () = server.serve() => {}
        () = rotation.run(settled) => {}
    }
    watching.abort();
}

async fn not_serving(error: &Error) {
    tracing::error!(
        error = %crate::report::error_chain(error),
        retry_in = ?RETRY,
        "the webhook is not served (v1beta1 conversion, PlatformCluster admission)"
    );
    tokio::time::sleep(RETRY).await;
}

/// capwasm's conversions: Cluster and MachinePool between v1beta1 and
/// v1beta2, a reference's version looked up among `crds`.
pub fn converter(crds: Store<CustomResourceDefinition>) -> Converter {
    Arc::new(move |object, version| {
        let versions = |reference: &ContractVersionedObjectReference| {
            resolve_in(&crds, reference)
                .map(|resolved| resolved.resource.version)
                .map_err(|e| Box::new(e) as BoxError)
        };
        convert(object, version, &versions).map_err(|e| crate::report::error_chain(&e))
    })
}
