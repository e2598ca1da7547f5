//! The validating webhook of PlatformClusters: a new or changed cluster is
//! judged before it is stored (its node groups' rules, a deprecated
//! template, and a change of template put to the new template's platform
//! provider), so that whoever makes a change that would be refused is told
//! at once, and nothing is stored. It decides only what it can: without the new template, or
//! without its provider in this process (loading still, or a replica that
//! does not lead and so loads none), it allows the change with a warning,
//! and the controller holds it as a refused-change condition instead.

use kube::ResourceExt as _;
use kube::api::Api;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};

use crate::api::{ClusterTemplate, PlatformCluster};
use crate::platform::change;
use crate::platform::documents::document;
use crate::platform::rules::{deprecated, node_groups};
use crate::wasm::Runtime;
use crate::wasm::composition::Verdict;

/// The path the webhook serves.
pub const PATH: &str = "/validate-platformcluster";

/// What the webhook judges with: the API (for the templates) and this
/// process's providers.
#[derive(Clone)]
pub struct Admission {
    client: kube::Client,
    runtime: Runtime,
}

/// What became of a change.
enum Judged {
    Allowed,
    Refused(String),
    /// Not decided here, for this reason.
    Undecided(String),
}

impl Admission {
    /// Judges with `client`'s templates and `runtime`'s providers.
    pub fn new(client: kube::Client, runtime: Runtime) -> Self {
        Self { client, runtime }
    }

    /// The response to one AdmissionReview.
    pub async fn review(
        &self,
        review: AdmissionReview<PlatformCluster>,
    ) -> AdmissionReview<DynamicObject> {
        let request: AdmissionRequest<PlatformCluster> = match review.try_into() {
            Ok(request) => request,
            Err(_) => {
                return AdmissionResponse::invalid("the AdmissionReview has no request")
                    .into_review();
            }
        };
        let mut response = AdmissionResponse::from(&request);
        let Some(cluster) = request.object.as_ref() else {
            return response.into_review();
        };
        match self.judge(cluster).await {
            Judged::Allowed => {}
            Judged::Refused(why) => response = response.deny(why),
            Judged::Undecided(why) => {
                tracing::debug!(cluster = %cluster.name_any(), why, "template change not judged at admission");
                response.warnings = Some(vec![format!(
                    "not checked on admission: {why}; the operator checks it"
                )]);
            }
        }
        response.into_review()
    }

    /// The spec's rules first (no API call), then the template: a
    /// deprecated one the cluster does not run yet is refused, and a change
    /// from the one it runs goes to the new one's provider.
    async fn judge(&self, cluster: &PlatformCluster) -> Judged {
        if let Err(why) = node_groups(&cluster.spec) {
            return Judged::Refused(why);
        }
        let new = &cluster.spec.template_name;
        let applied = cluster
            .status
            .as_ref()
            .and_then(|s| s.applied_template.clone());
        if applied.as_ref() == Some(new) {
            // It runs what it names (a count changed, a finalizer added).
            return Judged::Allowed;
        }
        let templates: Api<ClusterTemplate> = Api::all(self.client.clone());
        let new_template = match templates.get_opt(new).await {
            Ok(Some(template)) => template,
            Ok(None) => {
                return Judged::Undecided(format!("ClusterTemplate {new:?} does not exist"));
            }
            Err(error) => {
                return Judged::Undecided(format!("cannot read ClusterTemplate {new:?}: {error}"));
            }
        };
        if let Some(why) = deprecated(cluster, &new_template) {
            return Judged::Refused(why);
        }
        // A new cluster: no template to change from.
        let Some(old) = applied else {
            return Judged::Allowed;
        };
        let old_template = match templates.get_opt(&old).await {
            Ok(template) => template,
            Err(error) => {
                return Judged::Undecided(format!("cannot read ClusterTemplate {old:?}: {error}"));
            }
        };
        let provider = &new_template.spec.provider;
        let request = change::request(
            cluster,
            (document(cluster), document(&new_template)),
            (&old, old_template.as_ref()),
        );
        let uid = cluster.uid().unwrap_or_default();
        let namespace = cluster.namespace().unwrap_or_default();
        match self
            .runtime
            .validate(provider, &uid, &namespace, &request)
            .await
        {
            Ok(Verdict::Allowed) => Judged::Allowed,
            Ok(Verdict::Refused(why)) => {
                Judged::Refused(change::refusal(cluster, &old, provider, &why))
            }
            Err(error) => Judged::Undecided(error.to_string()),
        }
    }
}
