//! What the platform controller and the admission webhook both judge a
//! PlatformCluster by, without a client: its documents as the provider
//! reads them, the spec's own rules, and the question a change of template
//! puts to the provider.

pub mod change;
pub mod documents;
pub mod rules;
