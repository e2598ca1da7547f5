//! The runtime's calls by provider name: one method per export of the
//! provider worlds, each on the version that serves the object (a canary's
//! share goes to the canary), with the credentials withheld from the guest
//! and its result checked against the contract.

use wasmtime::Store;
use wasmtime::component::Instance as ComponentInstance;

use super::bindings::bootstrap_tokens::BootstrapToken;
use super::bindings::types;
use super::call::{self, GuestResult};
use super::credentials::{Credentialed, withhold};
use super::provider::{Callee, InfrastructureExports, WorldExports};
use super::runtime::Runtime;
use super::state::CallState;
use super::types::{BootstrapData, DeleteOutcome, Instance};
use super::{CallError, bootstrap, checks, clusters, machine_pools, node_shapes, pool_machines};

impl Runtime {
    /// What `provider` says of itself (every world exports it).
    pub async fn info(&self, provider: &str) -> Result<types::ProviderInfo, CallError> {
        let provider = self.provider(provider)?;
        call::info(&self.host(), &provider.callee("")).await
    }

    /// `bootstrap.generate` of `provider`: bootstrap data of the format it
    /// claims ([`checks::bootstrap_data`]).
    pub async fn generate(
        &self,
        provider: &str,
        request: &bootstrap::GenerateRequest,
    ) -> Result<BootstrapData, CallError> {
        self.generate_with_token(provider, request, None)
            .await
            .map(|(data, _)| data)
    }

    /// `bootstrap.generate` with `token` as what `bootstrap-tokens.join-token`
    /// answers; also whether the guest asked for it.
    pub async fn generate_with_token(
        &self,
        provider: &str,
        request: &bootstrap::GenerateRequest,
        token: Option<BootstrapToken>,
    ) -> Result<(BootstrapData, bool), CallError> {
        let object = &request.config_object;
        self.serve(provider, &object.uid, &object.namespace, async |serving| {
            let (request, keys) = withhold(serving.provider.capabilities(), request);
            let request = &*request;
            let mut callee = serving.callee();
            callee.keys = keys;
            callee.join_token.clone_from(&token);
            let (data, asked) = call::run(
                &self.host(),
                &callee,
                "bootstrap.generate",
                async |store, instance, pre| match &pre.world {
                    WorldExports::Bootstrap(bootstrap) => {
                        Some(match bootstrap.load(&mut *store, instance) {
                            Ok(exports) => exports
                                .call_generate(&mut *store, request)
                                .await
                                .map(|r| r.map(|data| (data, store.data().join_token_asked))),
                            Err(error) => Err(error),
                        })
                    }
                    WorldExports::Infrastructure(_)
                    | WorldExports::Platform(_)
                    | WorldExports::ControlPlane(_) => None,
                },
            )
            .await?;
            self.checked(
                &serving.provider,
                "bootstrap.generate",
                checks::bootstrap_data(&data),
            )?;
            Ok((data, asked))
        })
        .await
    }

    /// `machine-pools.reconcile` of `provider`: instances within the
    /// contract's bounds for the replicas asked for ([`checks::pool_state`]).
    pub async fn reconcile_pool(
        &self,
        provider: &str,
        request: &machine_pools::ReconcileRequest,
    ) -> Result<machine_pools::PoolState, CallError> {
        let served = Served {
            provider,
            uid: &request.pool.uid,
            tenant: &request.pool.namespace,
            export: "machine-pools.reconcile",
        };
        self.served(
            served,
            request,
            async |store, i, x, request| {
                x.machine_pools
                    .load(&mut *store, i)?
                    .call_reconcile(store, request)
                    .await
            },
            |state, request| checks::pool_state(state, request.replicas),
        )
        .await
    }

    /// `machine-pools.delete` of `provider`.
    pub async fn delete_pool(
        &self,
        provider: &str,
        request: &machine_pools::DeleteRequest,
    ) -> Result<DeleteOutcome, CallError> {
        let served = Served {
            provider,
            uid: &request.pool.uid,
            tenant: &request.pool.namespace,
            export: "machine-pools.delete",
        };
        self.served(
            served,
            request,
            async |store, i, x, request| {
                x.machine_pools
                    .load(&mut *store, i)?
                    .call_delete(store, request)
                    .await
            },
            |_, _| Ok(()),
        )
        .await
    }

    /// `pool-machines.remove` of `provider` (0.1.2 on): the pool with the
    /// instances asked for terminating or gone ([`checks::removal`]). A
    /// component without the export fails the call as not implementing it.
    pub async fn remove_instances(
        &self,
        provider: &str,
        request: &pool_machines::RemoveRequest,
    ) -> Result<machine_pools::PoolState, CallError> {
        let served = Served {
            provider,
            uid: &request.pool.uid,
            tenant: &request.pool.namespace,
            export: "pool-machines.remove",
        };
        self.served(
            served,
            request,
            async |store, i, x, request| {
                let Some(pool_machines) = &x.pool_machines else {
                    return Err(wasmtime::format_err!(
                        "the component does not export capwasm:provider/pool-machines"
                    ));
                };
                pool_machines
                    .load(&mut *store, i)?
                    .call_remove(store, request)
                    .await
            },
            |state, request| checks::removal(state, &request.remove, &request.instances),
        )
        .await
    }

    /// `node-shapes.describe` of `provider` (0.1.2 on): the nodes a pool's
    /// config makes, with cpu and memory and quantities Kubernetes parses
    /// ([`checks::node_shape`]). A component without the export fails the
    /// call as not implementing it.
    pub async fn describe_nodes(
        &self,
        provider: &str,
        request: &node_shapes::DescribeRequest,
    ) -> Result<node_shapes::NodeShape, CallError> {
        let served = Served {
            provider,
            uid: &request.pool.uid,
            tenant: &request.pool.namespace,
            export: "node-shapes.describe",
        };
        self.served(
            served,
            request,
            async |store, i, x, request| {
                let Some(node_shapes) = &x.node_shapes else {
                    return Err(wasmtime::format_err!(
                        "the component does not export capwasm:provider/node-shapes"
                    ));
                };
                node_shapes
                    .load(&mut *store, i)?
                    .call_describe(store, request)
                    .await
            },
            |shape, _| checks::node_shape(shape),
        )
        .await
    }

    /// `clusters.reconcile` of `provider`: an endpoint and failure domains
    /// within the contract's bounds ([`checks::cluster_state`]).
    pub async fn reconcile_cluster(
        &self,
        provider: &str,
        request: &clusters::ClusterRequest,
    ) -> Result<clusters::ClusterState, CallError> {
        let served = Served {
            provider,
            uid: &request.cluster_object.uid,
            tenant: &request.cluster_object.namespace,
            export: "clusters.reconcile",
        };
        self.served(
            served,
            request,
            async |store, i, x, request| {
                x.clusters
                    .load(&mut *store, i)?
                    .call_reconcile(store, request)
                    .await
            },
            |state, _| checks::cluster_state(state),
        )
        .await
    }

    /// `clusters.delete` of `provider`.
    pub async fn delete_cluster(
        &self,
        provider: &str,
        request: &clusters::ClusterRequest,
    ) -> Result<DeleteOutcome, CallError> {
        let served = Served {
            provider,
            uid: &request.cluster_object.uid,
            tenant: &request.cluster_object.namespace,
            export: "clusters.delete",
        };
        self.served(
            served,
            request,
            async |store, i, x, request| {
                x.clusters
                    .load(&mut *store, i)?
                    .call_delete(store, request)
                    .await
            },
            |_, _| Ok(()),
        )
        .await
    }

    /// An infrastructure export about an object, on the version that
    /// serves it, with the credentials withheld from the guest as its
    /// provider's capabilities say, and its result checked by `rules`.
    async fn served<Q: Credentialed, R>(
        &self,
        served: Served<'_>,
        request: &Q,
        body: impl AsyncFnOnce(
            &mut Store<CallState>,
            &ComponentInstance,
            &InfrastructureExports,
            &Q,
        ) -> GuestResult<R>,
        rules: impl FnOnce(&R, &Q) -> Result<(), checks::Violation>,
    ) -> Result<R, CallError> {
        self.serve(
            served.provider,
            served.uid,
            served.tenant,
            async |serving| {
                let (request, keys) = withhold(serving.provider.capabilities(), request);
                let request = &*request;
                let mut callee = serving.callee();
                callee.keys = keys;
                let result = self
                    .infrastructure(&callee, served.export, async |store, i, x| {
                        body(store, i, x, request).await
                    })
                    .await?;
                self.checked(&serving.provider, served.export, rules(&result, request))?;
                Ok(result)
            },
        )
        .await
    }

    /// `provider-ids.provider-id` of `provider`.
    pub async fn provider_id(
        &self,
        provider: &str,
        config: &str,
        instance: &Instance,
    ) -> Result<String, CallError> {
        let provider = self.provider(provider)?;
        self.infrastructure(
            &provider.callee(""),
            "provider-ids.provider-id",
            async |store, i, x| {
                x.provider_ids
                    .load(&mut *store, i)?
                    .call_provider_id(store, config, instance)
                    .await
            },
        )
        .await
    }

    /// `provider-ids.owns` of `provider`.
    pub async fn owns(&self, provider: &str, provider_id: &str) -> Result<bool, CallError> {
        let provider = self.provider(provider)?;
        let callee = provider.callee("");
        self.infrastructure(&callee, "provider-ids.owns", async |store, i, x| {
            x.provider_ids
                .load(&mut *store, i)?
                .call_owns(store, provider_id)
                .await
                .map(Ok)
        })
        .await
    }

    /// An export only the infrastructure world has.
    async fn infrastructure<R>(
        &self,
        callee: &Callee<'_>,
        export: &'static str,
        body: impl AsyncFnOnce(
            &mut Store<CallState>,
            &ComponentInstance,
            &InfrastructureExports,
        ) -> GuestResult<R>,
    ) -> Result<R, CallError> {
        call::run_in(
            &self.host(),
            callee,
            export,
            WorldExports::infrastructure,
            body,
        )
        .await
    }
}

/// Which object an export is called about, of which provider.
struct Served<'a> {
    provider: &'a str,
    uid: &'a str,
    /// The object's namespace.
    tenant: &'a str,
    export: &'static str,
}
