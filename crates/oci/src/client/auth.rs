//! How a pull is let in: the registry's challenge to `GET /v2/`, read from
//! its `WWW-Authenticate`, answered with a token from the service it names
//! or with the pull Secret's user and password, once per pull. Apart
//! because it is its own exchange with the registry, and a token service,
//! before any read.

use oci_client::errors::OciDistributionError;
use reqwest::StatusCode;
use reqwest::header::WWW_AUTHENTICATE;
use serde::Deserialize;

use super::{Authorization, Registry};
use crate::{Auth, Error};

/// What a registry's `WWW-Authenticate` asks for.
#[derive(Debug, PartialEq, Eq)]
enum Challenge {
    Bearer {
        realm: String,
        service: Option<String>,
    },
    Basic,
}

impl Registry<'_> {
    /// What requests carry, asked of the registry at the first one.
    pub(super) async fn authorization(&self) -> Result<&Authorization, Error> {
        self.authorization
            .get_or_try_init(|| self.negotiate())
            .await
    }

    /// The registry's challenge to `GET /v2/`, answered as docker and
    /// oci-client do: a Bearer token from the service it names (with the
    /// pull Secret's credentials if any), or Basic with those credentials.
    async fn negotiate(&self) -> Result<Authorization, Error> {
        let what = "the API version check";
        let response = self
            .http
            .get(format!("{}/v2/", self.base()))
            .send()
            .await
            .map_err(|e| self.error(what, e.into()))?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(Authorization::None);
        }
        // The body is not read: dropping the answer closes its connection.
        let challenge = response
            .headers()
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(challenge);
        match (challenge, &self.auth) {
            (Some(Challenge::Bearer { realm, service }), _) => self
                .token(&realm, service.as_deref())
                .await
                .map(Authorization::Bearer),
            (Some(Challenge::Basic), Auth::Basic { username, password }) => {
                Ok(Authorization::Basic {
                    username: username.clone(),
                    password: password.clone(),
                })
            }
            _ => Ok(Authorization::None),
        }
    }

    /// A pull token for the image's repository from the token service at `realm`.
    async fn token(&self, realm: &str, service: Option<&str>) -> Result<String, Error> {
        let what = format!("a pull token for {}", self.image.repository());
        let scope = format!("repository:{}:pull", self.image.reference().repository());
        let mut query = vec![("scope", scope.as_str())];
        query.extend(service.map(|s| ("service", s)));
        let url = reqwest::Url::parse_with_params(realm, &query)
            .ok()
            .filter(|u| matches!(u.scheme(), "https" | "http"))
            .ok_or_else(|| {
                self.error(
                    what.clone(),
                    OciDistributionError::UrlParseError(format!(
                        "the token service {realm:?} is not an HTTP(S) URL"
                    )),
                )
            })?;
        let mut request = self.http.get(url.clone());
        // Credentials go in the clear only where the registry itself is
        // spoken to in the clear (loopback).
        if let Auth::Basic { username, password } = &self.auth
            && (url.scheme() == "https" || self.image.plain_http())
        {
            request = request.basic_auth(username, Some(password));
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.error(what.clone(), e.into()))?;
        if response.status() != StatusCode::OK {
            return Err(self.refusal(response, &what).await);
        }
        let body = self.read_answer(response, &what).await?;
        token_of(&body).ok_or_else(|| {
            self.error(
                what,
                OciDistributionError::RegistryTokenDecodeError(
                    "the answer holds neither a token nor an access_token".into(),
                ),
            )
        })
    }
}

/// The first challenge in a `WWW-Authenticate` value the pull can answer:
/// Bearer with a realm, else Basic.
fn challenge(header: &str) -> Option<Challenge> {
    let mut basic = false;
    for challenge in http_auth::ChallengeParser::new(header).filter_map(Result::ok) {
        if challenge.scheme.eq_ignore_ascii_case("bearer") {
            let param = |name: &str| {
                challenge
                    .params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            if let Some(realm) = param("realm") {
                return Some(Challenge::Bearer {
                    realm,
                    service: param("service"),
                });
            }
        } else if challenge.scheme.eq_ignore_ascii_case("basic") {
            basic = true;
        }
    }
    basic.then_some(Challenge::Basic)
}

/// The token of a token service's answer (`token`, or OAuth2's `access_token`).
fn token_of(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Answer {
        token: Option<String>,
        access_token: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(body).ok()?;
    answer
        .token
        .filter(|t| !t.is_empty())
        .or(answer.access_token.filter(|t| !t.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_is_preferred_and_basic_taken_otherwise() {
        assert_eq!(
            challenge(r#"Bearer realm="https://auth.example/token",service="registry.example""#),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
            })
        );
        assert_eq!(
            challenge(r#"Basic realm="capwasm-test", Bearer realm="https://a/t""#),
            Some(Challenge::Bearer {
                realm: "https://a/t".into(),
                service: None,
            })
        );
        assert_eq!(
            challenge(r#"Basic realm="capwasm-test""#),
            Some(Challenge::Basic)
        );
        // A Bearer challenge without a realm names no token service.
        assert_eq!(challenge(r#"Bearer service="x""#), None);
        assert_eq!(challenge("Negotiate"), None);
    }

    #[test]
    fn a_token_answer_gives_token_or_access_token() {
        assert_eq!(token_of(br#"{"token":"t1"}"#).as_deref(), Some("t1"));
        assert_eq!(
            token_of(br#"{"token":"","access_token":"t2"}"#).as_deref(),
            Some("t2")
        );
        assert_eq!(token_of(br#"{"expires_in":60}"#), None);
        assert_eq!(token_of(b"<html>"), None);
    }
}
