//! What a pull reads of a registry: the digest a tag names, manifests and
//! blobs, each read within its bound and the pull's deadline and checked
//! against its digest. Apart from the parent's request plumbing because
//! these are what a pull asks for, each with the checks its answer must
//! pass.

use oci_client::errors::{DigestError, OciDistributionError};
use oci_client::manifest::OciDescriptor;
use reqwest::{Method, StatusCode};

use super::Registry;
use super::answer::{digest_header, read_within, sha256};
use crate::reference::is_sha256;
use crate::{BUNDLE_ARTIFACT_TYPE, Error, ImageRef};

impl Registry<'_> {
    /// The digest the image's tag names: the registry's digest header on a
    /// HEAD, else the digest of the manifest it serves.
    pub(crate) async fn tag_digest(&self) -> Result<String, Error> {
        let what = format!("the tag {}", self.image);
        self.within(&what, async {
            let url = self.manifest_url(self.image);
            let response = self.send(Method::HEAD, &url, true, &what).await?;
            let digest = match digest_header(&response) {
                Some(digest) => digest,
                None => self.read_manifest(self.image, &what).await?.1,
            };
            if !is_sha256(&digest) {
                return Err(self.error(
                    what.clone(),
                    OciDistributionError::DigestError(DigestError::UnsupportedAlgorithm(digest)),
                ));
            }
            Ok(digest)
        })
        .await
    }

    /// The manifest `reference` (a tag or digest of the image's repository)
    /// names, as raw bytes checked against its digest, with that digest.
    pub(crate) async fn manifest(&self, reference: &ImageRef) -> Result<(Vec<u8>, String), Error> {
        let what = format!("the manifest {reference}");
        self.within(&what, self.read_manifest(reference, &what))
            .await
    }

    /// The blob `descriptor` names, at most `limit` bytes, checked against
    /// its digest.
    pub(crate) async fn blob(
        &self,
        descriptor: &OciDescriptor,
        limit: u64,
    ) -> Result<Vec<u8>, Error> {
        let what = format!("the blob {}", descriptor.digest);
        let layout = |why: String| Error::Layout {
            image: self.image.by_digest(&descriptor.digest),
            why,
        };
        // The digest goes into the URL: it must be no more than a digest.
        if !is_sha256(&descriptor.digest) {
            return Err(layout(format!(
                "the blob digest {:?} is not sha256:<64 hex digits>",
                descriptor.digest
            )));
        }
        let size = u64::try_from(descriptor.size).unwrap_or(u64::MAX);
        if size > limit {
            return Err(Error::TooLarge {
                image: self.image.by_digest(&descriptor.digest),
                size,
                limit,
            });
        }
        self.within(&what, async {
            let url = format!(
                "{}/v2/{}/blobs/{}",
                self.base(),
                self.image.reference().repository(),
                descriptor.digest
            );
            let response = self.send(Method::GET, &url, false, &what).await?;
            let declared = response.content_length();
            let bytes = read_within(response.bytes_stream(), declared, size)
                .await
                .map_err(|e| self.error(what.clone(), e.into()))?
                .ok_or_else(|| {
                    layout(format!(
                        "the blob is longer than the {size} bytes its descriptor says"
                    ))
                })?;
            let actual = sha256(&bytes);
            if actual != descriptor.digest {
                return Err(self.error(
                    what.clone(),
                    OciDistributionError::DigestError(DigestError::VerificationError {
                        expected: descriptor.digest.clone(),
                        actual,
                    }),
                ));
            }
            Ok(bytes)
        })
        .await
    }

    /// The manifest at `reference`, within the cap, and its digest.
    async fn read_manifest(
        &self,
        reference: &ImageRef,
        what: &str,
    ) -> Result<(Vec<u8>, String), Error> {
        let response = self
            .send(Method::GET, &self.manifest_url(reference), true, what)
            .await?;
        let header = digest_header(&response);
        let body = self.read_answer(response, what).await?;
        let digest = sha256(&body);
        // A digest of another algorithm in the header cannot be checked here.
        let expected = reference
            .digest()
            .map(str::to_owned)
            .into_iter()
            .chain(header.filter(|h| h.starts_with("sha256:")));
        for expected in expected {
            if expected != digest {
                return Err(self.error(
                    what,
                    OciDistributionError::DigestError(DigestError::VerificationError {
                        expected,
                        actual: digest,
                    }),
                ));
            }
        }
        Ok((body, digest))
    }
}

impl Registry<'_> {
    /// The image index of the Sigstore bundles referring to `digest`, from
    /// the registry's referrers API; `None` when it has none (404), and
    /// the referrers tag (`sha256-<hex>`) is to be read instead.
    pub(crate) async fn referrers(&self, digest: &str) -> Result<Option<Vec<u8>>, Error> {
        let what = format!("the referrers of {digest}");
        self.within(&what, async {
            let url = format!(
                "{}/v2/{}/referrers/{digest}?artifactType={}",
                self.base(),
                self.image.reference().repository(),
                BUNDLE_ARTIFACT_TYPE.replace('+', "%2B").replace('/', "%2F"),
            );
            let response = self.request(Method::GET, &url, true, &what).await?;
            match response.status() {
                StatusCode::OK => self.read_answer(response, &what).await.map(Some),
                StatusCode::NOT_FOUND => Ok(None),
                _ => Err(self.refusal(response, &what).await),
            }
        })
        .await
    }
}
