//! One registry client per pull or push: its protocol, its credentials and
//! its timeouts, and its errors sorted into unreachable and refused.

use std::time::Duration;

use futures::StreamExt as _;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciDescriptor;

use super::{Auth, Error, ImageRef};

/// A client for `image`'s registry, authenticated with `auth`.
pub(crate) struct Registry<'a> {
    pub(crate) client: oci_client::Client,
    pub(crate) auth: oci_client::secrets::RegistryAuth,
    pub(crate) image: &'a ImageRef,
}

impl<'a> Registry<'a> {
    pub(crate) fn new(image: &'a ImageRef, auth: &Auth, timeout: Duration) -> Result<Self, Error> {
        // reqwest is built without a default TLS backend; the process's
        // rustls provider is ring, as for every other client here.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = ClientConfig {
            protocol: if image.plain_http() {
                ClientProtocol::HttpsExcept(vec![image.registry().to_owned()])
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(timeout.min(Duration::from_secs(5))),
            read_timeout: Some(timeout),
            // An index must be resolved by whoever names the image.
            platform_resolver: None,
            // One request per blob: what every registry takes (chunked
            // uploads are optional, and some answer them without a Location).
            use_monolithic_push: true,
            ..ClientConfig::default()
        };
        let client = oci_client::Client::try_from(config).map_err(|source| Error::Client {
            registry: image.registry().to_owned(),
            source,
        })?;
        Ok(Self {
            client,
            auth: auth.registry_auth(),
            image,
        })
    }

    /// The error of asking the registry for `what`.
    pub(crate) fn error(&self, what: impl Into<String>, source: OciDistributionError) -> Error {
        let registry = self.image.registry().to_owned();
        let unreachable = match &source {
            OciDistributionError::RequestError(e) => {
                e.is_connect() || e.is_timeout() || e.is_request()
            }
            OciDistributionError::ServerError { code, .. } => *code >= 500,
            _ => false,
        };
        if unreachable {
            Error::Unreachable { registry, source }
        } else {
            Error::Registry {
                registry,
                what: what.into(),
                source,
            }
        }
    }

    /// The manifest `reference` names, as raw bytes checked against its
    /// digest, with that digest.
    pub(crate) async fn manifest(&self, reference: &ImageRef) -> Result<(Vec<u8>, String), Error> {
        const ACCEPTED: &[&str] = &[
            oci_client::manifest::OCI_IMAGE_MEDIA_TYPE,
            oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
            oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
            oci_client::manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE,
        ];
        self.client
            .pull_manifest_raw(reference.reference(), &self.auth, ACCEPTED)
            .await
            .map(|(bytes, digest)| (bytes.to_vec(), digest))
            .map_err(|e| self.error(format!("the manifest {reference}"), e))
    }

    /// The blob `descriptor` names, at most `limit` bytes, checked against
    /// its digest.
    pub(crate) async fn blob(
        &self,
        descriptor: &OciDescriptor,
        limit: u64,
    ) -> Result<Vec<u8>, Error> {
        let what = || format!("the blob {}", descriptor.digest);
        let size = u64::try_from(descriptor.size).unwrap_or(u64::MAX);
        if size > limit {
            return Err(Error::TooLarge {
                image: self.image.by_digest(&descriptor.digest),
                size,
                limit,
            });
        }
        // Blob pulls take no credentials of their own: the client's store.
        self.client
            .store_auth_if_needed(self.image.registry(), &self.auth)
            .await;
        let mut stream = self
            .client
            .pull_blob_stream(self.image.reference(), descriptor)
            .await
            .map_err(|e| self.error(what(), e))?;
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.error(what(), OciDistributionError::IoError(e)))?;
            if (bytes.len() + chunk.len()) as u64 > size {
                return Err(Error::Layout {
                    image: self.image.by_digest(&descriptor.digest),
                    why: format!("the blob is longer than the {size} bytes its descriptor says"),
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}
