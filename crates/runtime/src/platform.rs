//! The runtime's calls into platform providers: `render`, `status` and
//! `validate` of the composition interface, each result checked
//! ([`composed`](super::composed)) before the host uses any of it.

use wasmtime::Store;
use wasmtime::component::Instance as ComponentInstance;

use super::call::{self, GuestResult};
use super::composed::{self, Composition};
use super::composition::{ClusterSummary, RenderRequest, StatusRequest, ValidateRequest, Verdict};
use super::provider::{Callee, WorldExports};
use super::runtime::Runtime;
use super::state::CallState;
use super::{CallError, bindings, bounds, text};

type Exports = bindings::interfaces::Composition;

impl Runtime {
    /// `composition.render` of `provider` for the platform cluster `uid` in
    /// `namespace`: objects its module may create there, none twice.
    pub async fn render(
        &self,
        provider: &str,
        uid: &str,
        namespace: &str,
        request: &RenderRequest,
    ) -> Result<Composition, CallError> {
        const EXPORT: &str = "composition.render";
        self.serve(provider, uid, namespace, async |serving| {
            let rendered = self
                .platform(&serving.callee(), EXPORT, async |store, i, x| {
                    x.load(&mut *store, i)?.call_render(store, request).await
                })
                .await?;
            let provider = &serving.provider;
            let allowed = &provider.capabilities().allowed_kinds;
            composed::rendered(rendered, namespace, allowed)
                .map_err(|violation| self.refused(provider, EXPORT, violation))
        })
        .await
    }

    /// `composition.status` of `provider` for the platform cluster `uid`
    /// in `namespace`.
    pub async fn platform_status(
        &self,
        provider: &str,
        uid: &str,
        namespace: &str,
        request: &StatusRequest,
    ) -> Result<ClusterSummary, CallError> {
        const EXPORT: &str = "composition.status";
        self.serve(provider, uid, namespace, async |serving| {
            let summary = self
                .platform(&serving.callee(), EXPORT, async |store, i, x| {
                    x.load(&mut *store, i)?.call_status(store, request).await
                })
                .await?;
            composed::summary(summary)
                .map_err(|violation| self.refused(&serving.provider, EXPORT, violation))
        })
        .await
    }

    /// `composition.validate` of `provider` for the platform cluster `uid`
    /// in `namespace`, a refusal's reason bounded as all guest text is.
    pub async fn validate(
        &self,
        provider: &str,
        uid: &str,
        namespace: &str,
        request: &ValidateRequest,
    ) -> Result<Verdict, CallError> {
        self.serve(provider, uid, namespace, async |serving| {
            let verdict = self
                .platform(
                    &serving.callee(),
                    "composition.validate",
                    async |store, i, x| x.load(&mut *store, i)?.call_validate(store, request).await,
                )
                .await?;
            Ok(match verdict {
                Verdict::Refused(why) => {
                    Verdict::Refused(text::clean(&why, bounds::MAX_MESSAGE_BYTES))
                }
                Verdict::Allowed => Verdict::Allowed,
            })
        })
        .await
    }

    /// An export only the platform world has.
    async fn platform<R>(
        &self,
        callee: &Callee<'_>,
        export: &'static str,
        body: impl AsyncFnOnce(&mut Store<CallState>, &ComponentInstance, &Exports) -> GuestResult<R>,
    ) -> Result<R, CallError> {
        call::run_in(&self.host(), callee, export, WorldExports::platform, body).await
    }
}
