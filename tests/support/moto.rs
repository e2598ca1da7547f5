//! moto's server, the AWS emulator (PyPI, installed by `tests/moto/install.sh`
//! into a virtualenv outside the clone), one per test on a loopback port
//! with signature checking on. Its first [`SETUP_CALLS`] calls pass
//! unchecked: the harness makes an IAM user allowed everything and an
//! access key with them, through moto's own IAM API (boto3 from the same
//! virtualenv). Every later request must be signed with that key.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use capwasm::api::providermodule::{AwsSigV4, ModuleCapabilities, RequestAuth, SecretReference};
use tempfile::TempDir;

use crate::binaries::build_script;
use crate::ports::free_port;
use crate::probe;
use crate::process::Process;
use crate::{CREDENTIALS_NAMESPACE, Error, Result};

/// Unchecked calls moto allows before it checks signatures: the set-up's.
const SETUP_CALLS: &str = "3";
/// How long moto gets to answer.
const READY: Duration = Duration::from_secs(30);

/// Makes the user, its policy and its key; prints `<id> <secret>`.
const SETUP: &str = r#"
import json, sys
import boto3
iam = boto3.client("iam", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="setup", aws_secret_access_key="setup")
iam.create_user(UserName="capwasm")
iam.put_user_policy(UserName="capwasm", PolicyName="everything", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
key = iam.create_access_key(UserName="capwasm")["AccessKey"]
print(key["AccessKeyId"], key["SecretAccessKey"])
"#;

/// A running moto server; stopped when dropped.
pub struct Moto {
    _process: Process,
    _dir: TempDir,
    /// `127.0.0.1:<port>`.
    pub authority: String,
    /// The virtualenv's `bin/` (its `python` has boto3).
    pub bin: PathBuf,
    /// The access key id of a user allowed everything.
    pub access_key_id: String,
    /// Its secret access key.
    pub secret_access_key: String,
}

impl Moto {
    /// Installs moto the first time, starts it and makes the key.
    pub async fn start() -> Result<Self> {
        let bin = build_script("moto/install.sh")?;
        let dir = crate::rundir::create(&crate::rundir::default_root())?;
        let authority = format!("127.0.0.1:{}", free_port()?);
        let (host, port) = authority.split_once(':').unwrap_or_default();
        let args = ["-H", host, "-p", port].map(str::to_owned);
        let mut process = Process::spawn_exiting_with_stdin(
            "moto",
            &bin.join("moto_server"),
            &args,
            &[("INITIAL_NO_AUTH_ACTION_COUNT", SETUP_CALLS)],
            dir.path().join("moto.log"),
        )?;
        let started = Instant::now();
        while !matches!(probe::get(&authority, "/moto-api/").await, Some((200, _))) {
            if let Some(status) = process.exited() {
                return Err(process.not_ready(format!("exited: {status}")));
            }
            if started.elapsed() > READY {
                return Err(process.not_ready(format!("no answer within {READY:?}")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let python: PathBuf = bin.join("python");
        let output = Command::new(&python)
            .args(["-c", SETUP, &format!("http://{authority}")])
            .output()
            .map_err(|source| Error::Spawn {
                name: "moto set-up",
                binary: python.clone(),
                source,
            })?;
        let printed = String::from_utf8_lossy(&output.stdout);
        let Some((id, secret)) = printed
            .trim()
            .split_once(' ')
            .filter(|_| output.status.success())
        else {
            return Err(process.not_ready(format!(
                "making an access key failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )));
        };
        Ok(Self {
            authority: authority.clone(),
            bin,
            access_key_id: id.to_owned(),
            secret_access_key: secret.to_owned(),
            _process: process,
            _dir: dir,
        })
    }

    /// Runs `script` with boto3 as the key's user: `sys.argv[1]` is the
    /// endpoint, then `args`; what it printed, or why it failed.
    pub fn boto3(&self, script: &str, args: &[&str]) -> Result<String> {
        let python = self.bin.join("python");
        let output = Command::new(&python)
            .arg("-c")
            .arg(script)
            .arg(format!("http://{}", self.authority))
            .args(args)
            .env("AWS_ACCESS_KEY_ID", &self.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", &self.secret_access_key)
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .output()
            .map_err(|source| Error::Spawn {
                name: "boto3 script",
                binary: python,
                source,
            })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(Error::Tool(format!(
                "a boto3 script failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )))
        }
    }
}

/// A ProviderModule's capabilities reaching `authority` (moto's, or a
/// proxy's in front of it), every request there signed by the host (SigV4,
/// `ec2` in `us-east-1`) with the default keys of credentials Secret
/// `secret` in [`CREDENTIALS_NAMESPACE`].
pub fn signed_capabilities(authority: &str, secret: &str) -> ModuleCapabilities {
    ModuleCapabilities {
        // EC2 instances' providerIDs: aws:///<zone>/<instance id>.
        provider_id_prefix: Some("aws:///".into()),
        allowed_hosts: vec![authority.to_owned()],
        credentials_secret: Some(SecretReference {
            namespace: CREDENTIALS_NAMESPACE.into(),
            name: secret.to_owned(),
        }),
        request_auth: vec![RequestAuth {
            host: authority.to_owned(),
            plain_http: true,
            aws_sig_v4: Some(AwsSigV4 {
                service: "ec2".into(),
                region: "us-east-1".into(),
                ..AwsSigV4::default()
            }),
            bearer: None,
        }],
        ..ModuleCapabilities::default()
    }
}
