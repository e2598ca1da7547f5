//! Image references as a ProviderModule names them, and the credentials
//! a pull Secret holds for their registry.

use std::collections::BTreeMap;

use base64::Engine as _;
use oci_client::Reference;
use serde::Deserialize;

use super::Error;

/// `REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`, with a tag or a digest
/// written out (no implied `latest`), and how to reach its registry.
#[derive(Clone, Debug)]
pub struct ImageRef {
    reference: Reference,
    plain_http: bool,
}

impl ImageRef {
    /// Parses `image`; `plain_http` only for a loopback registry.
    pub fn parse(image: &str, plain_http: bool) -> Result<Self, Error> {
        let invalid = |why: String| Error::Reference {
            image: image.to_owned(),
            why,
        };
        let reference: Reference = image.parse().map_err(|e| invalid(format!("{e}")))?;
        let last = image.rsplit('/').next().unwrap_or(image);
        if !last.contains(':') && !last.contains('@') {
            return Err(invalid(
                "names neither a tag nor a digest (write :TAG or @sha256:DIGEST)".into(),
            ));
        }
        if let Some(digest) = reference.digest()
            && !is_sha256(digest)
        {
            return Err(invalid(format!(
                "digest {digest} is not sha256:<64 hex digits>"
            )));
        }
        if plain_http && !is_loopback(reference.registry()) {
            return Err(Error::PlainHttpNotLoopback {
                registry: reference.registry().to_owned(),
            });
        }
        Ok(Self {
            reference,
            plain_http,
        })
    }

    /// The same repository at `digest`.
    #[must_use]
    pub fn at(&self, digest: &str) -> Self {
        Self {
            reference: self.reference.clone_with_digest(digest.to_owned()),
            plain_http: self.plain_http,
        }
    }

    /// The same repository at `tag`.
    #[must_use]
    pub(crate) fn tagged(&self, tag: &str) -> Self {
        Self {
            reference: Reference::with_tag(
                self.reference.registry().to_owned(),
                self.reference.repository().to_owned(),
                tag.to_owned(),
            ),
            plain_http: self.plain_http,
        }
    }

    /// The registry (`host[:port]`).
    pub fn registry(&self) -> &str {
        self.reference.registry()
    }

    /// The digest written in the reference, if any.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    /// `REGISTRY/REPOSITORY`.
    pub fn repository(&self) -> String {
        format!(
            "{}/{}",
            self.reference.registry(),
            self.reference.repository()
        )
    }

    /// `REGISTRY/REPOSITORY@DIGEST`.
    pub fn by_digest(&self, digest: &str) -> String {
        format!("{}@{digest}", self.repository())
    }

    /// Whether `claimed` (a cosign payload's `docker-reference`) names this
    /// image's repository, whatever tag or digest it adds, with Docker
    /// Hub's short and legacy names read as docker reads them.
    pub(crate) fn is_repository(&self, claimed: &str) -> bool {
        claimed.parse::<Reference>().is_ok_and(|claimed| {
            claimed
                .registry()
                .eq_ignore_ascii_case(self.reference.registry())
                && claimed.repository() == self.reference.repository()
        })
    }

    pub(crate) fn reference(&self) -> &Reference {
        &self.reference
    }

    pub(crate) fn plain_http(&self) -> bool {
        self.plain_http
    }
}

impl std::fmt::Display for ImageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.reference.whole())
    }
}

pub(crate) fn is_sha256(digest: &str) -> bool {
    digest
        .strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry.split(':').next().unwrap_or(registry),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// How to authenticate to a registry.
#[derive(Clone, Default)]
pub enum Auth {
    /// No credentials.
    #[default]
    Anonymous,
    /// A user name and password (or token), as `docker login` stores them.
    Basic {
        /// The user name.
        username: String,
        /// The password or token.
        password: String,
    },
}

impl std::fmt::Debug for Auth {
    // Never the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Anonymous => f.write_str("Anonymous"),
            Self::Basic { username, .. } => write!(f, "Basic({username})"),
        }
    }
}

impl Auth {
    /// The credentials a `.dockerconfigjson` holds for `registry`, or why
    /// there are none.
    pub fn from_docker_config(config: &[u8], registry: &str) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct DockerConfig {
            #[serde(default)]
            auths: BTreeMap<String, Entry>,
        }
        #[derive(Deserialize)]
        struct Entry {
            username: Option<String>,
            password: Option<String>,
            auth: Option<String>,
        }
        let config: DockerConfig = serde_json::from_slice(config)
            .map_err(|e| format!("is not a .dockerconfigjson: {e}"))?;
        let entry = config
            .auths
            .into_iter()
            .find(|(server, _)| {
                let server = server
                    .trim_start_matches("https://")
                    .trim_start_matches("http://");
                server.split('/').next() == Some(registry)
            })
            .map(|(_, entry)| entry)
            .ok_or_else(|| format!("has no entry for registry {registry}"))?;
        if let (Some(username), Some(password)) = (entry.username, entry.password) {
            return Ok(Self::Basic { username, password });
        }
        let auth = entry.auth.ok_or_else(|| {
            format!("its entry for {registry} has neither auth nor username and password")
        })?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .ok()
            .and_then(|d| String::from_utf8(d).ok())
            .ok_or_else(|| format!("its auth for {registry} is not base64 of user:password"))?;
        let (username, password) = decoded
            .split_once(':')
            .ok_or_else(|| format!("its auth for {registry} is not base64 of user:password"))?;
        Ok(Self::Basic {
            username: username.to_owned(),
            password: password.to_owned(),
        })
    }

    pub(crate) fn registry_auth(&self) -> oci_client::secrets::RegistryAuth {
        match self {
            Self::Anonymous => oci_client::secrets::RegistryAuth::Anonymous,
            Self::Basic { username, password } => {
                oci_client::secrets::RegistryAuth::Basic(username.clone(), password.clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_names_a_tag_or_a_digest() {
        let digest = format!("sha256:{}", "a".repeat(64));
        assert!(ImageRef::parse("127.0.0.1:5000/providers/sim:v1", true).is_ok());
        let pinned = ImageRef::parse(&format!("127.0.0.1:5000/providers/sim@{digest}"), true)
            .expect("a digest reference");
        assert_eq!(pinned.digest(), Some(digest.as_str()));
        assert_eq!(pinned.repository(), "127.0.0.1:5000/providers/sim");
        let error =
            ImageRef::parse("127.0.0.1:5000/providers/sim", true).expect_err("no tag, no digest");
        assert!(
            error.to_string().contains("neither a tag nor a digest"),
            "{error}"
        );
        assert!(ImageRef::parse("registry.example/sim@sha256:abc", false).is_err());
        assert!(ImageRef::parse("Not A Reference:::", false).is_err());
    }

    #[test]
    fn a_claimed_repository_matches_with_any_tag_or_digest_and_docker_hub_names() {
        let image = ImageRef::parse("127.0.0.1:5000/providers/sim:v1", true).expect("a reference");
        let digest = format!("sha256:{}", "a".repeat(64));
        for same in [
            "127.0.0.1:5000/providers/sim".to_owned(),
            "127.0.0.1:5000/providers/sim:v2".to_owned(),
            format!("127.0.0.1:5000/providers/sim@{digest}"),
        ] {
            assert!(image.is_repository(&same), "{same}");
        }
        for other in [
            "127.0.0.1:5000/providers/other",
            "127.0.0.1:5001/providers/sim",
            "127.0.0.1:5000/providers/sim/nested",
            "127.0.0.1:5000/providers",
            "",
            "not a reference!",
        ] {
            assert!(!image.is_repository(other), "{other}");
        }
        let hub = ImageRef::parse("docker.io/library/sim:v1", false).expect("a reference");
        for same in [
            "index.docker.io/library/sim",
            "docker.io/library/sim",
            "sim",
        ] {
            assert!(hub.is_repository(same), "{same}");
        }
        assert!(!hub.is_repository("docker.io/someone/sim"));
    }

    #[test]
    fn plain_http_is_for_loopback_registries_only() {
        assert!(ImageRef::parse("localhost:5000/p:v1", true).is_ok());
        assert!(ImageRef::parse("127.0.0.2:5000/p:v1", true).is_ok());
        assert!(matches!(
            ImageRef::parse("registry.example:5000/p:v1", true),
            Err(Error::PlainHttpNotLoopback { .. })
        ));
        assert!(ImageRef::parse("registry.example:5000/p:v1", false).is_ok());
    }

    #[test]
    fn docker_config_entries_are_found_by_registry() {
        let config = br#"{"auths":{"https://127.0.0.1:5000":{"auth":"dXNlcjpwYXNz"},"other.example":{"username":"u","password":"p"}}}"#;
        assert!(matches!(
            Auth::from_docker_config(config, "127.0.0.1:5000"),
            Ok(Auth::Basic { ref username, ref password }) if username == "user" && password == "pass"
        ));
        assert!(matches!(
            Auth::from_docker_config(config, "other.example"),
            Ok(Auth::Basic { ref username, .. }) if username == "u"
        ));
        let missing = Auth::from_docker_config(config, "third.example").expect_err("no entry");
        assert!(missing.contains("no entry for registry third.example"));
        assert!(Auth::from_docker_config(b"[]", "x").is_err());
    }
}
