//! What a runtime needs to serve the aws-ec2 provider against an EC2
//! endpoint with the host signing: the capabilities and the keys.

use crate::wasm::types::Credential;
use crate::wasm::{AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, Capabilities, HostAuth, Scheme};

/// Allowed to reach `authority` (plain HTTP: an emulator on loopback),
/// every request there signed by the host
/// (SigV4, `ec2` in `us-east-1`) with the keys of the call's credentials;
/// the guest sees none of them.
pub fn signed_capabilities(authority: &str) -> Capabilities {
    Capabilities {
        allowed_hosts: vec![authority.to_owned()],
        request_auth: vec![HostAuth {
            host: authority.to_owned(),
            plain_http: true,
            scheme: Scheme::AwsSigV4 {
                service: "ec2".into(),
                region: "us-east-1".into(),
                access_key_id: AWS_ACCESS_KEY_ID.into(),
                secret_access_key: AWS_SECRET_ACCESS_KEY.into(),
                session_token: None,
            },
        }],
        expose_credentials: false,
        allowed_kinds: Vec::new(),
    }
}

/// An access key as a call's credentials, under the names the signing rule reads.
pub fn credentials(access_key_id: &str, secret_access_key: &str) -> Vec<Credential> {
    vec![
        Credential {
            key: AWS_ACCESS_KEY_ID.into(),
            value: access_key_id.as_bytes().to_vec(),
        },
        Credential {
            key: AWS_SECRET_ACCESS_KEY.into(),
            value: secret_access_key.as_bytes().to_vec(),
        },
    ]
}
