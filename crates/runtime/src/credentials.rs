//! What the credentials a call is given become: keys the host
//! authenticates the guest's requests with, and the guest's own
//! `credentials` only where its module exposes them (weaker, opt-in).
//! Decided here, at the boundary, whatever the caller put in the request.

use std::borrow::Cow;
use std::sync::Arc;

use super::bindings::{
    bootstrap, clusters, control_planes, machine_pools, node_shapes, pool_machines,
    types::Credential,
};
use super::host::auth::Keys;
use super::limits::Capabilities;

/// A request that carries credentials.
pub(crate) trait Credentialed: Clone {
    fn credentials(&self) -> &[Credential];
    fn take_credentials(&mut self) -> Vec<Credential>;
}

macro_rules! credentialed {
    ($($request:ty),*) => {$(
        impl Credentialed for $request {
            fn credentials(&self) -> &[Credential] {
                &self.credentials
            }
            fn take_credentials(&mut self) -> Vec<Credential> {
                std::mem::take(&mut self.credentials)
            }
        }
    )*};
}

credentialed!(
    bootstrap::GenerateRequest,
    clusters::ClusterRequest,
    control_planes::ControlPlaneRequest,
    machine_pools::ReconcileRequest,
    machine_pools::DeleteRequest,
    pool_machines::RemoveRequest,
    node_shapes::DescribeRequest
);

/// The request as the guest may see it, and the keys the host keeps.
pub(crate) fn withhold<'r, R: Credentialed>(
    capabilities: &Capabilities,
    request: &'r R,
) -> (Cow<'r, R>, Option<Arc<Keys>>) {
    if request.credentials().is_empty() {
        return (Cow::Borrowed(request), None);
    }
    if capabilities.expose_credentials {
        let keys = Keys::new(request.credentials().to_vec());
        return (Cow::Borrowed(request), Some(Arc::new(keys)));
    }
    let mut withheld = request.clone();
    let keys = Keys::new(withheld.take_credentials());
    (Cow::Owned(withheld), Some(Arc::new(keys)))
}
