//! Referenced objects as a reconcile uses them: resolved from the cached
//! CRDs, read from the cache of their kind, and adopted (an owner reference
//! and the cluster-name label).

use std::sync::Arc;

use kube::api::DynamicObject;

use super::context::Context;
use super::error::Error;
use super::external::{Adopter, Resolved};
use super::reconciler::{Reconciler, Scope};
use crate::api::ContractVersionedObjectReference;

impl<K: Reconciler> Scope<K> {
    /// Resolves `reference` to a served version of its kind.
    pub fn resolve(
        &self,
        ctx: &Context,
        reference: &ContractVersionedObjectReference,
    ) -> Result<Resolved, Error> {
        ctx.external
            .resolve(reference)
            .map_err(|source| Error::Reference {
                reference: reference.to_string(),
                source,
            })
    }

    /// The referenced object, resolved, read from the cache of its kind and
    /// adopted by `adopter`. An adoption defers the status: the adopted
    /// object's change, now mapped to its owner, brings the object back.
    pub async fn adopted(
        &mut self,
        ctx: &Context,
        reference: &ContractVersionedObjectReference,
        adopter: Adopter<'_>,
    ) -> Result<(Resolved, Arc<DynamicObject>), Error> {
        let resolved = self.resolve(ctx, reference)?;
        let error = |source| Error::Reference {
            reference: reference.to_string(),
            source,
        };
        let object = ctx
            .external
            .get(&resolved, &self.namespace(), &reference.name)
            .await
            .map_err(error)?;
        let wrote = ctx
            .external
            .adopt(&resolved, &object, adopter)
            .await
            .map_err(error)?;
        self.defer_status |= wrote;
        Ok((resolved, object))
    }

    /// Asks for the referenced object's deletion. Whether it still exists;
    /// a kind no CRD serves has no objects.
    pub async fn delete_reference(
        &self,
        ctx: &Context,
        reference: &ContractVersionedObjectReference,
    ) -> Result<bool, Error> {
        let resolved = match self.resolve(ctx, reference) {
            Ok(resolved) => resolved,
            Err(Error::Reference { source, .. })
                if source.reason() == crate::api::Reason::ReferenceInvalid =>
            {
                return Ok(false);
            }
            Err(error) => return Err(error),
        };
        ctx.external
            .delete(&resolved, &self.namespace(), &reference.name)
            .await
            .map_err(|source| Error::Reference {
                reference: reference.to_string(),
                source,
            })
    }
}
