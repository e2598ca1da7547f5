//! The objects of platform clusters: the label-selected watches of the
//! kinds their modules may render ([`LabelledWatches`]), each object
//! labelled with the platform cluster it belongs to.

use crate::api::Reason;
use crate::controllers::cache::labelled::KindWatchError;
use crate::controllers::error::KindError;

pub use crate::controllers::cache::labelled::{Labelled as Child, LabelledWatches};

/// The objects of a kind a platform cluster is made of cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read a platform cluster's objects")]
pub struct Unreadable(#[source] pub KindWatchError);

impl KindError for Unreadable {
    fn reason(&self) -> Reason {
        Reason::KindUnavailable
    }

    fn metric_label(&self) -> &'static str {
        "platform_kind"
    }
}
