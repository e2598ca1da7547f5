//! References: v1beta1 `ObjectReference` (`apiVersion`, `kind`, `name`,
//! `namespace`) and v1beta2 `ContractVersionedObjectReference` (`apiGroup`,
//! `kind`, `name`), mapped as upstream's conversion webhook maps them.

use k8s_openapi::api::core::v1::ObjectReference;

use super::{ContractVersions, ConversionError};
use crate::ContractVersionedObjectReference;

/// A v1beta2 reference from a v1beta1 one: the group of its `apiVersion`
/// (the version is the contract's business in v1beta2), its kind and name.
/// `uid`, `resourceVersion` and `fieldPath` are dropped, as upstream drops
/// them; a namespace other than the referring object's is refused.
pub(super) fn from_v1beta1(
    reference: &ObjectReference,
    field: &str,
    kind: &'static str,
    namespace: Option<&str>,
) -> Result<ContractVersionedObjectReference, ConversionError> {
    let api_version = reference.api_version.as_deref().unwrap_or_default();
    // Kubernetes' ParseGroupVersion: `version` alone is the core group.
    let group = match api_version.split_once('/') {
        Some((_, version)) if version.contains('/') => {
            return Err(ConversionError::InvalidApiVersion {
                field: format!("{field}.apiVersion"),
                value: api_version.into(),
            });
        }
        Some((group, _)) => group,
        None => "",
    };
    if group.is_empty() {
        return Err(ConversionError::NoApiGroup {
            field: format!("{field}.apiVersion"),
            value: api_version.into(),
        });
    }
    let referenced_kind = required(reference.kind.as_deref(), field, "kind")?;
    let name = required(reference.name.as_deref(), field, "name")?;
    if let Some(other) = reference.namespace.as_deref().filter(|n| !n.is_empty())
        && Some(other) != namespace
    {
        return Err(ConversionError::OtherNamespace {
            field: format!("{field}.namespace"),
            value: other.into(),
            kind,
            namespace: namespace.unwrap_or_default().into(),
        });
    }
    Ok(ContractVersionedObjectReference::new(
        group,
        referenced_kind,
        name,
    ))
}

/// `value`, unless it is empty or missing.
fn required<'a>(
    value: Option<&'a str>,
    field: &str,
    name: &str,
) -> Result<&'a str, ConversionError> {
    value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| ConversionError::Missing {
            field: format!("{field}.{name}"),
        })
}

/// A v1beta1 reference from a v1beta2 one: `apiVersion` is the group and the
/// version `versions` finds for its kind, `namespace` the referring object's.
pub(super) fn to_v1beta1(
    reference: &ContractVersionedObjectReference,
    field: &str,
    namespace: Option<&str>,
    versions: &dyn ContractVersions,
) -> Result<ObjectReference, ConversionError> {
    if reference.api_group.is_empty() {
        return Err(ConversionError::Missing {
            field: format!("{field}.apiGroup"),
        });
    }
    let version =
        versions
            .version(reference)
            .map_err(|source| ConversionError::NoContractVersion {
                field: field.into(),
                reference: reference.to_string(),
                source,
            })?;
    if version.is_empty() || version.contains('/') {
        return Err(ConversionError::InvalidContractVersion {
            field: field.into(),
            reference: reference.to_string(),
            version,
        });
    }
    Ok(ObjectReference {
        api_version: Some(format!("{}/{version}", reference.api_group)),
        kind: Some(reference.kind.clone()),
        name: Some(reference.name.clone()),
        namespace: namespace.filter(|n| !n.is_empty()).map(str::to_owned),
        ..ObjectReference::default()
    })
}
