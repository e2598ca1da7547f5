//! From a kubeconfig Secret's `value` to a client configuration, refusing
//! whatever would let the Secret's writers act inside the operator.
//!
//! Anyone who can write Secrets in a Cluster's namespace controls this
//! input, so only inline credentials are accepted: no exec or auth-provider
//! plugins (they run code), no paths (they read the operator's files).
//! Every cluster and user entry is checked, not only the current context's,
//! so the verdict does not depend on which context is selected.

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

use super::error::InvalidKubeconfig;
use super::settings::Settings;

/// The client configuration for the kubeconfig in `value`, with this
/// module's timeouts.
pub(super) async fn client_config(
    value: &[u8],
    settings: &Settings,
) -> Result<kube::Config, InvalidKubeconfig> {
    let kubeconfig = parse(value)?;
    check(&kubeconfig)?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(InvalidKubeconfig::Config)?;
    // An unreachable cluster must fail a call in seconds, not hold a reconcile
    // for the default 30 s.
    config.connect_timeout = Some(settings.connect_timeout);
    // A server that accepts and then never answers must not hold a request
    // for ever; the bound lies above the watch timeout so that an idle watch
    // is ended by the server, not cut by us.
    config.read_timeout = Some(settings.read_timeout());
    // Without this, the time a pooled connection sat idle counts against the
    // read timeout of the next request on it.
    config.reset_reader_on_write = true;
    Ok(config)
}

fn parse(value: &[u8]) -> Result<Kubeconfig, InvalidKubeconfig> {
    let text = std::str::from_utf8(value).map_err(InvalidKubeconfig::NotUtf8)?;
    Kubeconfig::from_yaml(text).map_err(|error| match error {
        // The parser's message quotes the input; keep only the position.
        KubeconfigError::Parse(error) => {
            let location = error.location();
            InvalidKubeconfig::Parse {
                line: location.map(|l| l.line()).filter(|&n| n > 0),
                column: location.map(|l| l.column()).filter(|&n| n > 0),
            }
        }
        other => InvalidKubeconfig::Config(other),
    })
}

/// Refuses plugins and file references anywhere in the kubeconfig.
fn check(kubeconfig: &Kubeconfig) -> Result<(), InvalidKubeconfig> {
    for named in &kubeconfig.clusters {
        let Some(cluster) = &named.cluster else {
            continue;
        };
        if is_set(cluster.certificate_authority.as_deref()) {
            return Err(InvalidKubeconfig::LocalFile {
                entry: format!("cluster {:?}", named.name),
                field: "certificate-authority",
                inline: "certificate-authority-data",
            });
        }
    }
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else {
            continue;
        };
        if user.exec.is_some() {
            return Err(InvalidKubeconfig::ExecPlugin {
                user: named.name.clone(),
            });
        }
        if let Some(provider) = &user.auth_provider {
            return Err(InvalidKubeconfig::AuthProvider {
                user: named.name.clone(),
                provider: provider.name.clone(),
            });
        }
        let files = [
            (
                user.client_certificate.as_deref(),
                "client-certificate",
                "client-certificate-data",
            ),
            (user.client_key.as_deref(), "client-key", "client-key-data"),
            (user.token_file.as_deref(), "tokenFile", "token"),
        ];
        if let Some((_, field, inline)) = files.into_iter().find(|(path, ..)| is_set(*path)) {
            return Err(InvalidKubeconfig::LocalFile {
                entry: format!("user {:?}", named.name),
                field,
                inline,
            });
        }
    }
    Ok(())
}

/// kube treats an empty path as absent; so do we.
fn is_set(path: Option<&str>) -> bool {
    path.is_some_and(|path| !path.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubeconfig with inline credentials, to which `user` and `cluster`
    /// add lines under the one user and the one cluster.
    fn kubeconfig(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context:
    cluster: k
    user: u
clusters:
- name: k
  cluster:
    server: https://127.0.0.1:6443
{cluster}
users:
- name: u
  user:
    token: abc
{user}
"
        )
    }

    fn checked(cluster: &str, user: &str) -> Result<(), InvalidKubeconfig> {
        let parsed = parse(kubeconfig(cluster, user).as_bytes()).expect("test kubeconfig parses");
        check(&parsed)
    }

    #[test]
    fn check_accepts_inline_credentials() {
        let result = checked(
            "    certificate-authority-data: Zm9v",
            "    client-certificate-data: Zm9v\n    client-key-data: YmFy",
        );
        assert!(result.is_ok(), "{result:?}");
    }

    #[test]
    fn check_refuses_exec_plugin() {
        let result = checked(
            "",
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, id]",
        );
        assert!(
            matches!(&result, Err(InvalidKubeconfig::ExecPlugin { user }) if user == "u"),
            "{result:?}"
        );
    }

    #[test]
    fn check_refuses_auth_provider() {
        let result = checked("", "    auth-provider:\n      name: gcp\n      config: {}");
        assert!(
            matches!(&result, Err(InvalidKubeconfig::AuthProvider { provider, .. }) if provider == "gcp"),
            "{result:?}"
        );
    }

    #[test]
    fn check_refuses_certificate_authority_path() {
        let result = checked("    certificate-authority: /etc/kubernetes/pki/ca.crt", "");
        assert!(
            matches!(&result, Err(InvalidKubeconfig::LocalFile { field: "certificate-authority", entry, .. }) if entry == "cluster \"k\""),
            "{result:?}"
        );
    }

    #[test]
    fn check_refuses_client_certificate_path() {
        let result = checked("", "    client-certificate: /var/run/secrets/cert");
        assert!(
            matches!(
                &result,
                Err(InvalidKubeconfig::LocalFile {
                    field: "client-certificate",
                    ..
                })
            ),
            "{result:?}"
        );
    }

    #[test]
    fn check_refuses_client_key_path() {
        let result = checked("", "    client-key: /var/run/secrets/key");
        assert!(
            matches!(
                &result,
                Err(InvalidKubeconfig::LocalFile {
                    field: "client-key",
                    ..
                })
            ),
            "{result:?}"
        );
    }

    #[test]
    fn check_refuses_token_file() {
        let result = checked(
            "",
            "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
        );
        assert!(
            matches!(
                &result,
                Err(InvalidKubeconfig::LocalFile {
                    field: "tokenFile",
                    ..
                })
            ),
            "{result:?}"
        );
    }

    #[test]
    fn check_refuses_plugin_of_user_outside_current_context() {
        let mut text = kubeconfig("", "");
        text.push_str("- name: other\n  user:\n    exec:\n      command: curl\n");
        let result = check(&parse(text.as_bytes()).expect("parses"));
        assert!(
            matches!(&result, Err(InvalidKubeconfig::ExecPlugin { user }) if user == "other"),
            "{result:?}"
        );
    }

    #[test]
    fn check_accepts_empty_paths() {
        let result = checked("    certificate-authority: \"\"", "    tokenFile: \"\"");
        assert!(result.is_ok(), "{result:?}");
    }

    #[test]
    fn parse_error_keeps_position_but_not_the_text() {
        let secret = "s3cr3t-t0ken";
        let text = format!("apiVersion: v1\nusers: {secret}\n");
        let error = parse(text.as_bytes()).expect_err("a string is not a list of users");
        let message = crate::report::error_chain(&error);
        assert!(!message.contains(secret), "{message}");
        assert!(
            matches!(error, InvalidKubeconfig::Parse { line: Some(2), .. }),
            "{error:?}"
        );
    }

    #[test]
    fn parse_refuses_bytes_that_are_not_utf8() {
        let result = parse(&[0x61, 0xff, 0xfe]);
        assert!(
            matches!(result, Err(InvalidKubeconfig::NotUtf8(_))),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn client_config_sets_timeouts_above_the_watch_timeout() {
        let settings = Settings::default();
        let config = client_config(kubeconfig("", "").as_bytes(), &settings)
            .await
            .expect("valid kubeconfig");
        assert_eq!(config.connect_timeout, Some(settings.connect_timeout));
        let read = config.read_timeout.expect("read timeout set");
        assert!(read > settings.watch_timeout, "{read:?}");
        assert!(config.reset_reader_on_write);
    }

    #[tokio::test]
    async fn client_config_fails_without_current_context() {
        let text = "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n";
        let result = client_config(text.as_bytes(), &Settings::default()).await;
        assert!(
            matches!(
                result,
                Err(InvalidKubeconfig::Config(
                    KubeconfigError::CurrentContextNotSet
                ))
            ),
            "{result:?}"
        );
    }
}
