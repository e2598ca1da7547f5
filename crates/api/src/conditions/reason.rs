//! Reasons of conditions and Events: upstream's CamelCase names, and which
//! of them a person may have to act on.

macro_rules! reasons {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// Reasons of conditions and Events, upstream's where upstream has one.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[doc = $doc])* $name,)*
        }

        impl Reason {
            /// The CamelCase name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$name => stringify!($name),)*
                }
            }

            /// The reason named `name`, if it is one of ours.
            pub fn parse(name: &str) -> Option<Self> {
                match name {
                    $(stringify!($name) => Some(Self::$name),)*
                    _ => None,
                }
            }
        }
    };
}

reasons! {
    /// The condition holds.
    Ready,
    /// The condition does not hold and nothing more specific is known.
    NotReady,
    /// Paused by `spec.paused` on the Cluster or the paused annotation.
    Paused,
    /// Not paused.
    NotPaused,
    /// Not being deleted.
    NotDeleting,
    /// Every MachinePool is Available.
    Available,
    /// A MachinePool is not Available.
    NotAvailable,
    /// The Cluster has no MachinePools.
    NoWorkers,
    /// A MachinePool is creating replicas.
    ScalingUp,
    /// No MachinePool is creating replicas.
    NotScalingUp,
    /// A MachinePool is removing replicas.
    ScalingDown,
    /// No MachinePool is removing replicas.
    NotScalingDown,
    /// A kubeconfig generated from the Cluster's CA was made anew before its certificate expired.
    KubeconfigRotated,
    /// The cluster's certificate Secrets were made (`<cluster>-ca`, `-etcd`, `-proxy`, `-sa`).
    CertificatesGenerated,
    /// A certificate Secret of a control plane that has come up is gone:
    /// made anew, it would break everything that trusts the old one.
    CertificatesLost,
    /// A certificate Secret of the cluster holds no usable certificate, or
    /// one could not be made.
    CertificatesInvalid,
    /// The Cluster named by `spec.clusterName` does not exist.
    ClusterNotFound,
    /// A provider object has no Cluster API owner yet.
    WaitingForOwner,
    /// The owner an owner reference names does not exist.
    OwnerNotFound,
    /// A referenced object does not exist.
    ReferenceNotFound,
    /// A reference names a kind with no CRD, or a CRD without a contract label.
    ReferenceInvalid,
    /// A referenced object is controlled by another object.
    ReferenceOwnedByOther,
    /// The bootstrap config has not produced its data Secret yet.
    WaitingForDataSecret,
    /// The bootstrap data Secret exists.
    DataSecretAvailable,
    /// The user set `dataSecretName`; no bootstrap config is used.
    DataSecretProvided,
    /// The infrastructure object is not provisioned yet.
    WaitingForInfrastructure,
    /// The control plane is not initialized yet.
    WaitingForControlPlane,
    /// The infrastructure object reported a terminal failure.
    InfrastructureFailed,
    /// The infrastructure object went away after it had been provisioned.
    InfrastructureDeleted,
    /// Fewer Nodes are Ready than the pool has replicas.
    WaitingForReplicasReady,
    /// The `<cluster>-kubeconfig` Secret does not exist.
    KubeconfigSecretNotFound,
    /// The `<cluster>-kubeconfig` Secret does not hold a usable kubeconfig.
    KubeconfigInvalid,
    /// The workload cluster's API server does not answer.
    WorkloadClusterUnreachable,
    /// The Cluster has no control-plane endpoint yet.
    WaitingForControlPlaneEndpoint,
    /// The pool has no bootstrap data yet.
    WaitingForBootstrapData,
    /// The pool's instances are being created or are booting.
    WaitingForInstances,
    /// The ProviderModule named by `spec.provider` does not exist.
    ProviderNotFound,
    /// The ProviderModule exists but has no loaded version.
    ProviderNotReady,
    /// The ProviderModule implements another world than this kind needs.
    ProviderWorldMismatch,
    /// A cluster-scoped object (a ProviderModule, a ClusterTemplate) does
    /// not allow the referring object's namespace (`allowedNamespaces`).
    NamespaceNotAllowed,
    /// `spec.config` does not satisfy the provider's schema.
    InvalidConfig,
    /// Checking `spec.config` against the provider's schema took longer than its budget.
    ConfigCheckTimedOut,
    /// The ProviderModule's credentials Secret cannot be read.
    CredentialsNotFound,
    /// The ProviderModule names a credentials Secret outside the namespace the operator reads them from.
    CredentialsNotAllowed,
    /// A host turned down the credentials the host authenticated the provider's request with.
    CredentialsRejected,
    /// A `requestAuth` rule reads a key the credentials Secret lacks.
    CredentialsKeyMissing,
    /// The provider asked to be called again later.
    ProviderRetrying,
    /// The provider reported a terminal failure.
    ProviderFailed,
    /// The provider's code trapped.
    GuestTrapped,
    /// The provider's code ran past its deadline.
    GuestTimedOut,
    /// The provider's calls kept running into their deadline: they are refused for a while.
    ProviderThrottled,
    /// The provider's calls are not throttled.
    NotThrottled,
    /// Every turn of the provider was taken: the call did not start, and
    /// is made again in about a second (never written to a status).
    ProviderBusy,
    /// The provider's code exceeded its memory limit.
    GuestMemoryLimit,
    /// The provider returned more than its output limit.
    GuestOutputTooLarge,
    /// The provider returned a result that breaks the contract (a malformed
    /// or repeated providerID, too many instances, ...); nothing of it was used.
    InvalidProviderResult,
    /// The provider could not be instantiated.
    GuestUnavailable,
    /// A ProviderModule's code is being fetched, verified and compiled.
    Loading,
    /// A ProviderModule's code is in service.
    Loaded,
    /// A ProviderModule's code could not be fetched.
    FetchFailed,
    /// A ProviderModule's code does not have its pinned digest.
    DigestMismatch,
    /// A ProviderModule's code is not a usable component.
    ModuleInvalid,
    /// A newer version replaced the one in service.
    Swapped,
    /// A ProviderModule's image reference, or the image it names, is not usable.
    ImageInvalid,
    /// A ProviderModule's registry does not answer.
    RegistryUnreachable,
    /// A ProviderModule's image did not come within the pull's deadline.
    PullTimedOut,
    /// A ProviderModule's image has no cosign signature.
    SignatureNotFound,
    /// A ProviderModule's image is signed, but not by the keys its policy asks for.
    SignatureUntrusted,
    /// A ProviderModule's image has no SLSA provenance attestation by its
    /// provenance signer naming the builder and source repository its
    /// policy asks for.
    ProvenanceMismatch,
    /// What a ProviderModule's image stores as signatures is not one: a
    /// bundle that does not parse, a referrer that is not a bundle.
    SignatureMalformed,
    /// A ProviderModule's image carries a valid signature of another digest.
    SignatureDigestMismatch,
    /// A ProviderModule's image carries a valid signature made for another repository.
    SignatureRepositoryMismatch,
    /// A ProviderModule's verification key is not usable.
    VerificationKeyInvalid,
    /// A new version serves a share of objects as a canary.
    CanaryStarted,
    /// A canary serves every object now.
    Promoted,
    /// A canary broke too often and was taken out of service.
    RolledBack,
    /// Deletion waits for the MachinePools of the Cluster.
    WaitingForWorkersDeletion,
    /// Deletion waits for the bootstrap config and infrastructure objects.
    WaitingForInfrastructureDeletion,
    /// Deletion waits for the provider to remove what it provisioned.
    WaitingForProviderDeletion,
    /// Deletion waits for the pool's Nodes to be removed.
    WaitingForNodeDeletion,
    /// Deletion is complete.
    DeletionCompleted,
    /// Node references were set.
    SuccessfulSetNodeRefs,
    /// Node references could not be set.
    FailedSetNodeRef,
    /// Nodes that left the pool were deleted from the workload cluster.
    NodesDeleted,
    /// Bootstrap data was generated into its Secret.
    DataSecretCreated,
    /// The host's bootstrap token of a config whose pool has machines to
    /// join expired; a new one and new data are made.
    BootstrapTokenRenewed,
    /// The host's bootstrap token of a config whose pool has machines to
    /// join was deleted from the workload cluster before it expired; a new
    /// one and new data are made.
    BootstrapTokenMissing,
    /// The phase changed.
    PhaseChanged,
    /// A write to the API server failed.
    ApiError,
    /// A PlatformCluster names a ClusterTemplate that does not exist.
    TemplateNotFound,
    /// A new PlatformCluster names a deprecated ClusterTemplate.
    TemplateDeprecated,
    /// The template's provider refused a change of the cluster's spec.
    TemplateChangeRefused,
    /// The template (and its change, if any) is accepted.
    TemplateAccepted,
    /// A PlatformCluster's spec breaks a rule (a node group with both a
    /// count and bounds, say).
    InvalidSpec,
    /// The rendered objects are applied.
    Composed,
    /// A rendered kind cannot be watched (not served, cluster-scoped, not listable).
    KindUnavailable,
    /// A PlatformCluster renders an object that exists and was not created
    /// for it (a team's own, another platform cluster's): nothing applied.
    ObjectNotOwned,
    /// Another PlatformCluster renders an object created for this one; it
    /// stays this one's.
    ObjectContested,
    /// A PlatformCluster stayed in a transitional phase past its template's timeout.
    PhaseTimedOut,
    /// A PlatformCluster waits for its CAPI Cluster to be gone.
    WaitingForClusterDeletion,
    /// A PlatformCluster waits for the rest of its objects to be gone.
    WaitingForObjectsDeletion,
    /// A Machine has no providerID or Node yet.
    WaitingForNode,
    /// A Machine's Node is gone, or was never found.
    NodeDoesNotExist,
    /// A Machine being deleted drains its Node: cordoned, its Pods evicted.
    DrainingNode,
    /// A Machine's Node was drained.
    SuccessfulDrainNode,
    /// A Machine's Node could not be drained (the eviction API failed).
    FailedDrainNode,
    /// A Machine's Node drain passed its `nodeDrainTimeoutSeconds`: the
    /// Pods left were not evicted.
    NodeDrainTimedOut,
    /// A pool replaces instances that are not up to date.
    RollingOut,
    /// Every instance of a pool is up to date.
    NotRollingOut,
    /// An instance was made from the pool's current spec.
    UpToDate,
    /// An instance was made before the pool's spec changed.
    NotUpToDate,
    /// A pool's instances are not up to date and its provider cannot
    /// remove chosen ones (it does not export `pool-machines`).
    RolloutUnsupported,
    /// A pool's provider described its nodes: `status.capacity` holds.
    CapacityKnown,
    /// A pool's provider cannot describe its nodes for this config (an
    /// instance type it does not know, say): no scaling from zero.
    CapacityUnknown,
    /// A pool's provider does not export `node-shapes`: no scaling from zero.
    CapacityUnsupported,
}

impl Reason {
    /// Whether an Event of this reason is a Warning: something a person may
    /// have to act on, rather than progress.
    pub fn is_warning(self) -> bool {
        matches!(
            self,
            Self::ClusterNotFound
                | Self::OwnerNotFound
                | Self::ReferenceNotFound
                | Self::ReferenceInvalid
                | Self::ReferenceOwnedByOther
                | Self::InfrastructureFailed
                | Self::InfrastructureDeleted
                | Self::KubeconfigSecretNotFound
                | Self::KubeconfigInvalid
                | Self::CertificatesLost
                | Self::CertificatesInvalid
                | Self::WorkloadClusterUnreachable
                | Self::ProviderNotFound
                | Self::ProviderNotReady
                | Self::ProviderWorldMismatch
                | Self::NamespaceNotAllowed
                | Self::InvalidConfig
                | Self::ConfigCheckTimedOut
                | Self::CredentialsNotFound
                | Self::CredentialsRejected
                | Self::CredentialsKeyMissing
                | Self::CredentialsNotAllowed
                | Self::ProviderFailed
                | Self::GuestTrapped
                | Self::GuestTimedOut
                | Self::ProviderThrottled
                | Self::GuestMemoryLimit
                | Self::GuestOutputTooLarge
                | Self::InvalidProviderResult
                | Self::GuestUnavailable
                | Self::FetchFailed
                | Self::DigestMismatch
                | Self::ModuleInvalid
                | Self::ImageInvalid
                | Self::RegistryUnreachable
                | Self::PullTimedOut
                | Self::SignatureNotFound
                | Self::SignatureUntrusted
                | Self::SignatureMalformed
                | Self::ProvenanceMismatch
                | Self::SignatureDigestMismatch
                | Self::SignatureRepositoryMismatch
                | Self::VerificationKeyInvalid
                | Self::RolledBack
                | Self::FailedSetNodeRef
                | Self::ApiError
                | Self::TemplateNotFound
                | Self::TemplateDeprecated
                | Self::TemplateChangeRefused
                | Self::InvalidSpec
                | Self::KindUnavailable
                | Self::ObjectNotOwned
                | Self::ObjectContested
                | Self::PhaseTimedOut
                | Self::BootstrapTokenMissing
                | Self::NodeDoesNotExist
                | Self::FailedDrainNode
                | Self::NodeDrainTimedOut
                | Self::CapacityUnknown
        )
    }
}
