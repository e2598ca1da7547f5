//! The certificate the server presents, replaced while it serves: each TLS
//! handshake takes the one current then, so a renewal is served from the
//! next connection on, without a restart, and connections already open
//! keep theirs.

use std::sync::{Arc, PoisonError, RwLock};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::super::Error;
use super::super::certs::ServingCert;

/// The serving certificate current now, and the PEM it was read from.
pub struct CertResolver {
    provider: Arc<CryptoProvider>,
    current: RwLock<(String, Arc<CertifiedKey>)>,
}

impl std::fmt::Debug for CertResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertResolver").finish_non_exhaustive()
    }
}

impl CertResolver {
    /// Serves `cert`.
    ///
    /// # Errors
    ///
    /// [`Error::Tls`] when its certificate or key cannot be read, or do
    /// not match.
    pub fn new(cert: &ServingCert) -> Result<Self, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = certified(&provider, cert)?;
        Ok(Self {
            provider,
            current: RwLock::new((cert.cert_pem.clone(), key)),
        })
    }

    /// Serves `cert` from the next handshake on; false when it is served
    /// already.
    ///
    /// # Errors
    ///
    /// As [`CertResolver::new`]; the certificate served stays.
    pub fn set(&self, cert: &ServingCert) -> Result<bool, Error> {
        if self.served_pem() == cert.cert_pem {
            return Ok(false);
        }
        let key = certified(&self.provider, cert)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) =
            (cert.cert_pem.clone(), key);
        Ok(true)
    }

    /// The PEM of the certificate served now.
    pub fn served_pem(&self) -> String {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }

    /// A TLS configuration serving through `resolver` (HTTP/1.1).
    ///
    /// # Errors
    ///
    /// [`Error::Tls`] when the protocol versions cannot be set.
    pub fn config(resolver: Arc<Self>) -> Result<ServerConfig, Error> {
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&resolver.provider))
            .with_safe_default_protocol_versions()
            .map_err(Error::Tls)?
            .with_no_client_auth()
            .with_cert_resolver(resolver);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .1,
        ))
    }
}

/// `cert`'s chain and key, checked to match.
fn certified(provider: &CryptoProvider, cert: &ServingCert) -> Result<Arc<CertifiedKey>, Error> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| Error::Tls(rustls::Error::General(e.to_string())))?;
    if chain.is_empty() {
        return Err(Error::Tls(rustls::Error::NoCertificatesPresented));
    }
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes())
        .map_err(|e| Error::Tls(rustls::Error::General(e.to_string())))?;
    CertifiedKey::from_der(chain, key, provider)
        .map(Arc::new)
        .map_err(Error::Tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_certificate_is_served_and_the_same_one_is_not_reloaded() {
        let names = vec!["localhost".to_owned()];
        let validity = crate::webhook::certs::Validity::default();
        let first = crate::webhook::certs::generate(&names, validity).unwrap();
        let second = crate::webhook::certs::generate(&names, validity).unwrap();
        let resolver = CertResolver::new(&first).unwrap();
        assert!(!resolver.set(&first).unwrap());
        assert!(resolver.set(&second).unwrap());
        assert_eq!(resolver.served_pem(), second.cert_pem);
        // A certificate with another's key is refused, the served one kept.
        let wrong = ServingCert {
            cert_pem: first.ca_pem.clone(),
            ..first.clone()
        };
        assert!(resolver.set(&wrong).is_err());
        assert_eq!(resolver.served_pem(), second.cert_pem);
    }
}
