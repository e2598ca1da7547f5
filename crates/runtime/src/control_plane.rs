//! The runtime's calls into control-plane providers: `reconcile` and
//! `delete` of the control-planes interface, on the version that serves
//! the object, with the credentials withheld as its module says and the
//! state checked ([`checks::control_plane_state`]) before the host uses it.

use wasmtime::Store;
use wasmtime::component::Instance as ComponentInstance;

use super::call::{self, GuestResult};
use super::control_planes::{ControlPlaneRequest, ControlPlaneState};
use super::credentials::withhold;
use super::provider::{Callee, WorldExports};
use super::runtime::Runtime;
use super::state::CallState;
use super::types::DeleteOutcome;
use super::{CallError, bindings, bounds, checks, text};

type Exports = bindings::interfaces::ControlPlanes;

impl Runtime {
    /// `control-planes.reconcile` of `provider` for `request`'s object: its
    /// state, checked, its message made printable and bounded.
    pub async fn reconcile_control_plane(
        &self,
        provider: &str,
        request: &ControlPlaneRequest,
    ) -> Result<ControlPlaneState, CallError> {
        let mut state = self
            .control_plane_call(
                provider,
                request,
                "control-planes.reconcile",
                async |store, i, x, request| {
                    x.load(&mut *store, i)?.call_reconcile(store, request).await
                },
                |state, request| checks::control_plane_state(state, request.replicas),
            )
            .await?;
        state.message = state
            .message
            .map(|m| text::clean(&m, bounds::MAX_MESSAGE_BYTES));
        Ok(state)
    }

    /// `control-planes.delete` of `provider` for `request`'s object.
    pub async fn delete_control_plane(
        &self,
        provider: &str,
        request: &ControlPlaneRequest,
    ) -> Result<DeleteOutcome, CallError> {
        self.control_plane_call(
            provider,
            request,
            "control-planes.delete",
            async |store, i, x, request| x.load(&mut *store, i)?.call_delete(store, request).await,
            |_, _| Ok(()),
        )
        .await
    }

    /// An export of the control-planes interface about `request`'s object,
    /// its result checked by `rules`.
    async fn control_plane_call<R>(
        &self,
        provider: &str,
        request: &ControlPlaneRequest,
        export: &'static str,
        body: impl AsyncFnOnce(
            &mut Store<CallState>,
            &ComponentInstance,
            &Exports,
            &ControlPlaneRequest,
        ) -> GuestResult<R>,
        rules: impl FnOnce(&R, &ControlPlaneRequest) -> Result<(), checks::Violation>,
    ) -> Result<R, CallError> {
        let object = &request.control_plane;
        self.serve(provider, &object.uid, &object.namespace, async |serving| {
            let (request, keys) = withhold(serving.provider.capabilities(), request);
            let request = &*request;
            let mut callee = serving.callee();
            callee.keys = keys;
            let result = self
                .control_plane(&callee, export, async |store, i, x| {
                    body(store, i, x, request).await
                })
                .await?;
            self.checked(&serving.provider, export, rules(&result, request))?;
            Ok(result)
        })
        .await
    }

    /// An export only the control-plane world has.
    async fn control_plane<R>(
        &self,
        callee: &Callee<'_>,
        export: &'static str,
        body: impl AsyncFnOnce(&mut Store<CallState>, &ComponentInstance, &Exports) -> GuestResult<R>,
    ) -> Result<R, CallError> {
        call::run_in(
            &self.host(),
            callee,
            export,
            WorldExports::control_plane,
            body,
        )
        .await
    }
}
