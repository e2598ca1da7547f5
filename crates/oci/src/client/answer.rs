//! A registry's answers read and decoded: a body read within a bound that
//! is never exceeded in memory, the error a refusal says, a manifest's
//! digest as the registry states it and as computed. Apart because none of
//! it needs a registry, so it is tested on plain streams and bytes.

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use oci_client::errors::{OciDistributionError, OciEnvelope};
use reqwest::{Response, StatusCode};
use sha2::{Digest as _, Sha256};

/// Where a registry says a manifest's digest.
const DIGEST_HEADER: &str = "docker-content-digest";

/// The body of `chunks`, or `None` as soon as it is known to pass `limit`
/// bytes (from the length the answer declares, or from what came): what
/// is past the limit is never held.
pub(super) async fn read_within<E>(
    mut chunks: impl Stream<Item = Result<Bytes, E>> + Unpin,
    declared: Option<u64>,
    limit: u64,
) -> Result<Option<Vec<u8>>, E> {
    if declared.is_some_and(|n| n > limit) {
        return Ok(None);
    }
    let mut body =
        Vec::with_capacity(usize::try_from(declared.unwrap_or(0).min(limit)).unwrap_or_default());
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if (body.len() + chunk.len()) as u64 > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The error a registry's refusal says, as the distribution spec writes
/// them: an error envelope, or a status and a message.
pub(super) fn status_error(status: StatusCode, body: &[u8], url: &str) -> OciDistributionError {
    let url = url.to_owned();
    if status == StatusCode::UNAUTHORIZED {
        return OciDistributionError::UnauthorizedError { url };
    }
    if status.is_success() {
        return OciDistributionError::SpecViolationError(format!(
            "expected HTTP status 200, got {status}"
        ));
    }
    if status.is_client_error()
        && let Ok(envelope) = serde_json::from_slice::<OciEnvelope>(body)
    {
        return OciDistributionError::RegistryError { envelope, url };
    }
    OciDistributionError::ServerError {
        code: status.as_u16(),
        url,
        message: String::from_utf8_lossy(body).into_owned(),
    }
}

pub(super) fn digest_header(response: &Response) -> Option<String> {
    response
        .headers()
        .get(DIGEST_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

pub(super) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(sizes: &[usize]) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
        futures::stream::iter(
            sizes
                .iter()
                .map(|n| Ok(Bytes::from(vec![b'x'; *n])))
                .collect::<Vec<_>>(),
        )
    }

    async fn read(sizes: &[usize], declared: Option<u64>, limit: u64) -> Option<usize> {
        read_within(chunks(sizes), declared, limit)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .map(|body| body.len())
    }

    #[tokio::test]
    async fn an_answer_within_the_limit_is_read_whole() {
        assert_eq!(read(&[3, 4, 3], None, 10).await, Some(10));
        assert_eq!(read(&[3, 4, 3], Some(10), 10).await, Some(10));
        assert_eq!(read(&[], None, 0).await, Some(0));
    }

    #[tokio::test]
    async fn an_answer_past_the_limit_is_refused_at_the_chunk_that_crosses_it() {
        assert_eq!(read(&[3, 4, 4], None, 10).await, None);
        // What comes after the crossing chunk is never asked for.
        let mut polled = 0;
        let endless = futures::stream::repeat_with(|| {
            polled += 1;
            Ok::<_, std::io::Error>(Bytes::from_static(&[0; 1024]))
        });
        assert!(
            read_within(endless, None, 4096)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        );
        assert_eq!(polled, 5);
    }

    #[tokio::test]
    async fn a_declared_length_past_the_limit_is_refused_before_reading() {
        let never = futures::stream::pending::<Result<Bytes, std::io::Error>>();
        assert!(
            read_within(never, Some(1 << 30), 4 << 20)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        );
    }

    #[test]
    fn refusals_keep_the_registry_error_envelope_or_the_status() {
        let envelope = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"no","detail":null}]}"#;
        assert!(matches!(
            status_error(StatusCode::NOT_FOUND, envelope, "u"),
            OciDistributionError::RegistryError { .. }
        ));
        assert!(matches!(
            status_error(StatusCode::NOT_FOUND, b"not json", "u"),
            OciDistributionError::ServerError { code: 404, .. }
        ));
        assert!(matches!(
            status_error(StatusCode::UNAUTHORIZED, b"", "u"),
            OciDistributionError::UnauthorizedError { .. }
        ));
        assert!(matches!(
            status_error(StatusCode::BAD_GATEWAY, envelope, "u"),
            OciDistributionError::ServerError { code: 502, .. }
        ));
        assert!(matches!(
            status_error(StatusCode::ACCEPTED, b"", "u"),
            OciDistributionError::SpecViolationError(_)
        ));
    }
}
