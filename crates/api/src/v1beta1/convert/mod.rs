//! Conversion between v1beta2 (stored) and v1beta1, field by field as
//! upstream's conversion webhook maps them, and lossless both ways:
//!
//! - v1beta2 → v1beta1 → v1beta2 gives back the same object: what v1beta1
//!   cannot hold (a `false` or empty `initialization`, the order of the
//!   failure domains, empty `deprecated` or `deletion` structs) is written to
//!   the `cluster.x-k8s.io/conversion-data` annotation and restored from it,
//!   where it still agrees with what the v1beta1 object holds.
//! - v1beta1 → v1beta2 → v1beta1 gives back the same object, given the same
//!   contract versions, except where upstream's conversion normalises too: a
//!   reference's `apiVersion` names the version its CRD's contract label
//!   picks and its `namespace` the object's, its `uid`, `resourceVersion` and
//!   `fieldPath` are dropped, an empty `status.v1beta2` is dropped, and
//!   `nodeDeletionTimeout` is kept in whole seconds.
//!
//! A v1beta1 reference becomes a v1beta2 one by taking the group of its
//! `apiVersion`; the other way needs a version, which upstream reads from the
//! contract labels of the referenced kind's CRD: [`ContractVersions`] is that
//! look-up. References to the core group or to another namespace cannot be
//! converted and are refused, naming the field.

mod cluster;
mod machinepool;
mod refs;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::API_VERSION;
use crate::annotations::CONVERSION_DATA;
use crate::{CLUSTER_API_VERSION, Cluster, ContractVersionedObjectReference, MachinePool};

pub use cluster::{cluster_from_v1beta1, cluster_to_v1beta1};
pub use machinepool::{machine_pool_from_v1beta1, machine_pool_to_v1beta1};

/// The error a [`ContractVersions`] look-up may give.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Which version of a referenced kind a v1beta1 reference names: upstream
/// picks the served version its CRD's contract label lists
/// (`cluster.x-k8s.io/v1beta2: v1beta1_v1beta2`), as the controllers resolve
/// references. Closures taking the reference implement it.
pub trait ContractVersions {
    /// The version, such as `v1beta2`, of `reference`'s group and kind.
    fn version(&self, reference: &ContractVersionedObjectReference) -> Result<String, BoxError>;
}

impl<F> ContractVersions for F
where
    F: Fn(&ContractVersionedObjectReference) -> Result<String, BoxError>,
{
    fn version(&self, reference: &ContractVersionedObjectReference) -> Result<String, BoxError> {
        self(reference)
    }
}

/// Why an object cannot be converted. Field paths are the JSON paths in the
/// object being converted.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// A v1beta1 reference's `apiVersion` names no group (`v1`, or none):
    /// v1beta2 references name a group, and core kinds are not allowed.
    #[error("{field}: {value:?} has no API group")]
    NoApiGroup {
        /// The `apiVersion` field.
        field: String,
        /// Its value.
        value: String,
    },
    /// A v1beta1 reference's `apiVersion` is not `group/version`.
    #[error("{field}: {value:?} is not an API version such as group/version")]
    InvalidApiVersion {
        /// The `apiVersion` field.
        field: String,
        /// Its value.
        value: String,
    },
    /// A v1beta1 reference names another namespace: v1beta2 references are
    /// to the referring object's namespace.
    #[error("{field}: {value:?} is not the {kind}'s namespace {namespace:?}")]
    OtherNamespace {
        /// The `namespace` field.
        field: String,
        /// Its value.
        value: String,
        /// The referring kind.
        kind: &'static str,
        /// The referring object's namespace.
        namespace: String,
    },
    /// A field v1beta2 requires is empty or missing.
    #[error("{field}: must be set")]
    Missing {
        /// The field.
        field: String,
    },
    /// No version of the referenced kind is known to name in v1beta1.
    #[error("{field}: no version of {reference} to name in its apiVersion")]
    NoContractVersion {
        /// The reference.
        field: String,
        /// `Kind.group "name"`.
        reference: String,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// The contract look-up gave something that is not a version.
    #[error("{field}: {version:?}, the version found for {reference}, is not a version")]
    InvalidContractVersion {
        /// The reference.
        field: String,
        /// `Kind.group "name"`.
        reference: String,
        /// What the look-up gave.
        version: String,
    },
    /// The object does not read as its kind and version.
    #[error("{path}: {message}")]
    Invalid {
        /// Where (`.` for the whole object).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The conversion-data annotation does not read as what v1beta2 keeps there.
    #[error("annotation {CONVERSION_DATA}: {message}")]
    ConversionData {
        /// What is wrong.
        message: String,
    },
    /// Not a Cluster or MachinePool of a version served here, or a version
    /// it cannot be converted to.
    #[error("cannot convert {kind} {from:?} to {to:?}")]
    Unsupported {
        /// The object's kind.
        kind: String,
        /// Its apiVersion.
        from: String,
        /// The one asked for.
        to: String,
    },
    /// The converted object could not be written as JSON.
    #[error("cannot write the converted object")]
    Write(#[source] serde_json::Error),
}

/// Converts one object of an `apiextensions.k8s.io/v1` `ConversionReview`:
/// a Cluster or MachinePool of `cluster.x-k8s.io/v1beta1` or `v1beta2` to
/// `desired_api_version`, unchanged when it is there already. Metadata is
/// kept as it is, but for the conversion-data annotation.
pub fn convert(
    object: Value,
    desired_api_version: &str,
    versions: &dyn ContractVersions,
) -> Result<Value, ConversionError> {
    let field = |name: &str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ConversionError::Missing { field: name.into() })
    };
    let (api_version, kind) = (field("apiVersion")?, field("kind")?);
    let served = |version: &str| version == API_VERSION || version == CLUSTER_API_VERSION;
    if !matches!(kind.as_str(), "Cluster" | "MachinePool")
        || !served(&api_version)
        || !served(desired_api_version)
    {
        return Err(ConversionError::Unsupported {
            kind,
            from: api_version,
            to: desired_api_version.into(),
        });
    }
    if api_version == desired_api_version {
        return Ok(object);
    }
    let to_v1beta1 = desired_api_version == API_VERSION;
    let converted = match (kind.as_str(), to_v1beta1) {
        ("Cluster", true) => to_json(&cluster_to_v1beta1(&read::<Cluster>(&object)?, versions)?),
        ("Cluster", false) => to_json(&cluster_from_v1beta1(&read(&object)?)?),
        ("MachinePool", true) => to_json(&machine_pool_to_v1beta1(
            &read::<MachinePool>(&object)?,
            versions,
        )?),
        _ => to_json(&machine_pool_from_v1beta1(&read(&object)?)?),
    }?;
    Ok(keep_metadata(object, converted))
}

fn read<T: DeserializeOwned>(object: &Value) -> Result<T, ConversionError> {
    serde_path_to_error::deserialize(object).map_err(|error| ConversionError::Invalid {
        path: error.path().to_string(),
        message: error.into_inner().to_string(),
    })
}

fn to_json<T: Serialize>(object: &T) -> Result<Value, ConversionError> {
    serde_json::to_value(object).map_err(ConversionError::Write)
}

/// `converted` with the metadata of `original`, in which only the
/// conversion-data annotation is replaced by the converted object's.
fn keep_metadata(original: Value, mut converted: Value) -> Value {
    let data = converted
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(CONVERSION_DATA))
        .cloned();
    let Value::Object(mut object) = original else {
        return converted;
    };
    let mut metadata = object.remove("metadata").unwrap_or(Value::Null);
    if let Some(fields) = metadata.as_object_mut() {
        match fields.get_mut("annotations") {
            Some(Value::Object(annotations)) => {
                let had = annotations.remove(CONVERSION_DATA).is_some();
                if let Some(data) = data {
                    annotations.insert(CONVERSION_DATA.into(), data);
                } else if had && annotations.is_empty() {
                    fields.remove("annotations");
                }
            }
            _ => {
                if let Some(data) = data {
                    let annotations = serde_json::Map::from_iter([(CONVERSION_DATA.into(), data)]);
                    fields.insert("annotations".into(), Value::Object(annotations));
                }
            }
        }
    }
    if let Some(fields) = converted.as_object_mut() {
        fields.insert("metadata".into(), metadata);
    }
    converted
}

/// Takes the conversion data off `metadata`; none when it has none.
fn take_data<T: DeserializeOwned>(metadata: &mut ObjectMeta) -> Result<Option<T>, ConversionError> {
    let Some(annotations) = metadata.annotations.as_mut() else {
        return Ok(None);
    };
    let Some(text) = annotations.remove(CONVERSION_DATA) else {
        return Ok(None);
    };
    if annotations.is_empty() {
        metadata.annotations = None;
    }
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|error| ConversionError::ConversionData {
            message: error.to_string(),
        })
}

/// Writes `data` to the conversion-data annotation of `metadata`, replacing
/// any there; removes it when there is nothing to keep.
fn put_data<T: Serialize + Default + PartialEq>(
    metadata: &mut ObjectMeta,
    data: &T,
) -> Result<(), ConversionError> {
    let annotations = metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.remove(CONVERSION_DATA);
    if *data != T::default() {
        let text = serde_json::to_string(data).map_err(ConversionError::Write)?;
        annotations.insert(CONVERSION_DATA.into(), text);
    }
    if annotations.is_empty() {
        metadata.annotations = None;
    }
    Ok(())
}

/// The v1beta2 value kept in the conversion data where it still converts to
/// what the v1beta1 object holds; else the one converted from the v1beta1
/// object. The same rule as upstream's restoring of `false` flags, for every
/// part v1beta1 cannot hold.
fn restore<T, V: PartialEq>(
    kept: Option<T>,
    to_v1beta1: impl Fn(&T) -> V,
    held: &V,
    from_v1beta1: impl FnOnce() -> T,
) -> T {
    match kept {
        Some(kept) if to_v1beta1(&kept) == *held => kept,
        _ => from_v1beta1(),
    }
}

/// A v1beta2 `*bool` from a v1beta1 `bool` (upstream's
/// `Convert_bool_To_Pointer_bool`): `true` is `Some(true)`; `false` is
/// `Some(false)` only when the kept v1beta2 value says so, else unset.
fn flag(held: bool, kept: Option<bool>) -> Option<bool> {
    if held {
        Some(true)
    } else if kept == Some(false) {
        Some(false)
    } else {
        None
    }
}

/// `value`, if it differs from what converting it to v1beta1 and back gives.
fn lost<T: PartialEq + Clone>(value: Option<&T>, round_trip: Option<&T>) -> Option<T> {
    value.filter(|v| round_trip != Some(*v)).cloned()
}

#[cfg(test)]
mod tests;
