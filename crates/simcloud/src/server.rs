//! The HTTP API over a [`SimCloud`], and serving it.

use std::net::{Ipv4Addr, SocketAddr};

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Json, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use http_body_util::LengthLimitError;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::api::{ControlPlane, CreateInstance, Instance, InstanceList, PutControlPlane};
use super::api_error::ApiError;
use super::cloud::SimCloud;
use super::error::Error;
use super::faults::{Fault, HANG};
use super::instance_types::{self, InstanceType};
use super::inventory::Created;
use super::{nodes, pods};
use capwasm_runtime::report::error_chain;

impl SimCloud {
    /// Serves the API on `listener` until `shutdown` completes, then stops
    /// accepting and lets requests in flight finish. Also keeps the Nodes of
    /// running instances in step, if [`Settings::nodes`](super::Settings::nodes) is set.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), Error> {
        let workload = self.settings().nodes.clone();
        let served = axum::serve(listener, self.clone().router())
            .with_graceful_shutdown(shutdown)
            .into_future();
        let served = match workload {
            // In this task, not a spawned one, so that it stops with the server.
            Some(client) => tokio::select! {
                served = served => served,
                () = nodes::keep_in_step(self, client.clone()) => Ok(()),
                () = pods::finish_deletions(client) => Ok(()),
            },
            None => served.await,
        };
        served.map_err(Error::Serve)
    }

    /// Serves the API on `listener` in a task of the current Tokio runtime,
    /// until the returned handle is dropped or shut down.
    pub fn start(self, listener: TcpListener) -> Result<RunningSimCloud, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(Error::NoRuntime)?;
        let addr = listener.local_addr().map_err(Error::LocalAddr)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = runtime.spawn(self.clone().serve(listener, async {
            // A dropped sender stops the server as well.
            let _ = stopped.await;
        }));
        Ok(RunningSimCloud {
            cloud: self,
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// Serves the API on a free port of 127.0.0.1, as [`SimCloud::start`] does.
    pub async fn start_on_loopback(self) -> Result<RunningSimCloud, Error> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        self.start(listener)
    }

    fn router(self) -> Router {
        let body_limit = self.settings().max_body_bytes;
        Router::new()
            .route(
                "/v1/regions/{region}/instances",
                post(create_instance).get(list_instances),
            )
            .route(
                "/v1/regions/{region}/instances/{id}",
                delete(delete_instance),
            )
            .route("/v1/instance-types/{name}", get(describe_instance_type))
            .route(
                "/v1/control-planes/{name}",
                put(put_control_plane)
                    .get(get_control_plane)
                    .delete(delete_control_plane),
            )
            .fallback(|| async {
                ApiError::new(StatusCode::NOT_FOUND, "NotFound", "no such API".into())
            })
            // Faults, when a test asks for them, on requests that got past authorization.
            .layer(middleware::from_fn_with_state(self.clone(), inject_faults))
            // On every path, unknown ones included, as a real API does.
            .layer(middleware::from_fn_with_state(self.clone(), authorize))
            .layer(middleware::from_fn_with_state(body_limit, read_body))
            // The extractors' own limit (2 MiB by default) must not be the lower one.
            .layer(DefaultBodyLimit::max(body_limit))
            .with_state(self)
    }
}

/// A simulated cloud serving its API. Dropping it stops the server at once;
/// [`RunningSimCloud::shutdown`] stops it gracefully. The cloud's state
/// stays inspectable through [`RunningSimCloud::cloud`] either way.
#[derive(Debug)]
pub struct RunningSimCloud {
    cloud: SimCloud,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), Error>>>,
}

impl RunningSimCloud {
    /// Where the API listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL for a provider's `endpoint`, such as `http://127.0.0.1:40123`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The cloud, to inspect.
    pub fn cloud(&self) -> &SimCloud {
        &self.cloud
    }

    /// Stops accepting, waits for requests in flight, and reports how serving ended.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(Error::Join)?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningSimCloud {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Reads the whole request body, up to `limit`, before anything answers:
/// a response sent while the client is still writing its body (a DELETE's
/// empty chunked body, a refused POST) makes hyper close the connection
/// under the client, which then reports a protocol error instead of the
/// response.
async fn read_body(State(limit): State<usize>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(error) => {
            let error = error.into_inner();
            if error.is::<LengthLimitError>() {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "RequestTooLarge",
                    format!("the request body is over the limit of {limit} bytes"),
                )
            } else {
                ApiError::rejected(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the request body: {}", error_chain(&*error)),
                )
            }
            .into_response()
        }
    }
}

async fn authorize(State(cloud): State<SimCloud>, request: Request, next: Next) -> Response {
    let Some(token) = cloud.settings().bearer_token.as_deref() else {
        return next.run(request).await;
    };
    if bearer_matches(request.headers().get(header::AUTHORIZATION), token) {
        return next.run(request).await;
    }
    tracing::debug!(
        path = request.uri().path(),
        "refused a request without the bearer token"
    );
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "Unauthorized",
        "a valid `Authorization: Bearer <token>` header is required".into(),
    )
    .with_header(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"sim-cloud\""),
    )
    .into_response()
}

/// Whether `header` is `Bearer <token>`; compares in constant time, as a
/// real API would, so that the token cannot be guessed byte by byte.
fn bearer_matches(header: Option<&HeaderValue>, token: &str) -> bool {
    let Some(value) = header.map(HeaderValue::as_bytes) else {
        return false;
    };
    let Some((scheme, presented)) = value.split_at_checked(7) else {
        return false;
    };
    scheme.eq_ignore_ascii_case(b"bearer ")
        && presented.len() == token.len()
        && presented
            .iter()
            .zip(token.as_bytes())
            .fold(0, |diff, (a, b)| diff | (a ^ b))
            == 0
}

async fn create_instance(
    State(cloud): State<SimCloud>,
    region: Result<Path<String>, PathRejection>,
    body: Result<Json<CreateInstance>, JsonRejection>,
) -> Result<(StatusCode, Json<Instance>), ApiError> {
    let Path(region) = region?;
    let Json(body) = body?;
    Ok(match cloud.create(&region, body)? {
        Created::New(instance) => (StatusCode::CREATED, Json(instance)),
        Created::Existing(instance) => (StatusCode::OK, Json(instance)),
    })
}

#[derive(Deserialize)]
struct ListQuery {
    pool: Option<String>,
}

async fn list_instances(
    State(cloud): State<SimCloud>,
    region: Result<Path<String>, PathRejection>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<InstanceList>, ApiError> {
    let Path(region) = region?;
    let Query(query) = query?;
    let instances = cloud.list(&region, query.pool.as_deref())?;
    Ok(Json(InstanceList { instances }))
}

async fn describe_instance_type(
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<InstanceType>, ApiError> {
    let Path(name) = path?;
    instance_types::find(&name).map(Json).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "InvalidInstanceType",
            format!("this cloud offers no instance type {name}"),
        )
    })
}

async fn delete_instance(
    State(cloud): State<SimCloud>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(StatusCode, Json<Instance>), ApiError> {
    let Path((region, id)) = path?;
    cloud
        .terminate(&region, &id)
        .map(|instance| (StatusCode::ACCEPTED, Json(instance)))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "InstanceNotFound",
                format!("region {region} has no instance {id}"),
            )
        })
}

async fn put_control_plane(
    State(cloud): State<SimCloud>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Json<PutControlPlane>, JsonRejection>,
) -> Result<Json<ControlPlane>, ApiError> {
    let Path(name) = name?;
    let Json(body) = body?;
    Ok(Json(cloud.put_control_plane(&name, body)?))
}

async fn get_control_plane(
    State(cloud): State<SimCloud>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<ControlPlane>, ApiError> {
    let Path(name) = name?;
    cloud
        .get_control_plane(&name)
        .map(Json)
        .ok_or_else(|| no_control_plane(&name))
}

async fn delete_control_plane(
    State(cloud): State<SimCloud>,
    name: Result<Path<String>, PathRejection>,
) -> Result<(StatusCode, Json<ControlPlane>), ApiError> {
    let Path(name) = name?;
    cloud
        .delete_control_plane(&name)
        .map(|plane| (StatusCode::ACCEPTED, Json(plane)))
        .ok_or_else(|| no_control_plane(&name))
}

fn no_control_plane(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "ControlPlaneNotFound",
        format!("there is no control plane {name}"),
    )
}

/// The middleware: each request as the faults set say.
async fn inject_faults(State(cloud): State<SimCloud>, request: Request, next: Next) -> Response {
    match cloud.injector().next() {
        None => next.run(request).await,
        Some(Fault::Unavailable) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            r#"{"code":"ServiceUnavailable","message":"the API is having a bad minute"}"#,
        )
            .into_response(),
        Some(Fault::Hang) => {
            let response = next.run(request).await;
            tokio::time::sleep(HANG).await;
            response
        }
        Some(Fault::Drop) => {
            let response = next.run(request).await;
            let (mut parts, _) = response.into_parts();
            // Announces a body it never sends: the connection is cut.
            parts
                .headers
                .insert(header::CONTENT_LENGTH, HeaderValue::from_static("64"));
            let cut = futures::stream::once(async {
                Err::<axum::body::Bytes, _>(std::io::Error::other("connection dropped"))
            });
            Response::from_parts(parts, Body::from_stream(cut))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use base64::Engine as _;
    use tower::ServiceExt as _;

    use super::super::{InstanceRecord, InstanceState, JoinFailure, Settings};
    use super::*;
    use crate::inventory::Refusal;
    use axum::http::HeaderMap;

    const INSTANCES: &str = "/v1/regions/local-1/instances";

    fn router(settings: Settings) -> (SimCloud, Router) {
        let cloud = SimCloud::new(settings);
        (cloud.clone(), cloud.router())
    }

    fn instant() -> Settings {
        Settings {
            boot_delay: Duration::ZERO,
            termination_delay: Duration::ZERO,
            ..Settings::default()
        }
    }

    fn create_body(token: &str, data: &[u8]) -> serde_json::Value {
        serde_json::json!({
            "requestToken": token,
            "pool": "ns/pool",
            "bootstrapData": base64::engine::general_purpose::STANDARD.encode(data),
            "bootstrapFormat": "cloud-config",
        })
    }

    async fn call(
        router: &Router,
        method: &str,
        uri: &str,
        body: Option<&serde_json::Value>,
        token: Option<&str>,
    ) -> (StatusCode, HeaderMap, serde_json::Value) {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match body {
            Some(json) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        let response = router
            .clone()
            .oneshot(request.body(body).expect("request"))
            .await
            .expect("infallible");
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.expect("body");
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (parts.status, parts.headers, json)
    }

    #[tokio::test]
    async fn shutdown_stops_listening_and_keeps_the_cloud_inspectable() {
        let running = SimCloud::new(instant())
            .start_on_loopback()
            .await
            .expect("starts");
        let addr = running.addr();
        assert!(addr.ip().is_loopback());
        tokio::net::TcpStream::connect(addr)
            .await
            .expect("listening");
        let cloud = running.cloud().clone();
        running.shutdown().await.expect("a clean stop");
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
        assert!(cloud.instances().is_empty());
    }

    #[tokio::test]
    async fn create_answers_201_then_200_with_the_same_instance_for_a_repeated_token() {
        let (cloud, router) = router(instant());
        let body = create_body("t-0", b"#cloud-config\n");
        let (status, _, first) = call(&router, "POST", INSTANCES, Some(&body), None).await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(first["state"], "running", "no boot delay");
        let (status, _, again) = call(&router, "POST", INSTANCES, Some(&body), None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(again["id"], first["id"]);
        assert_eq!(cloud.creations("local-1", "t-0"), 1);
    }

    #[tokio::test]
    async fn list_shows_the_pools_instances_until_termination_ends() {
        let (cloud, router) = router(Settings {
            boot_delay: Duration::from_millis(20),
            termination_delay: Duration::from_millis(20),
            ..Settings::default()
        });
        let body = create_body("t-0", b"#cloud-config\n");
        let (_, _, created) = call(&router, "POST", INSTANCES, Some(&body), None).await;
        assert_eq!(created["state"], "pending");
        let id = created["id"].as_str().expect("an id").to_owned();
        let running = |all: &[InstanceRecord]| {
            all.iter()
                .any(|r| r.instance.state == InstanceState::Running)
        };
        tokio::time::timeout(Duration::from_secs(10), cloud.wait_for(running))
            .await
            .expect("booted in time");

        let list = format!("{INSTANCES}?pool=ns%2Fpool");
        let (status, _, listed) = call(&router, "GET", &list, None, None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(listed["instances"][0]["state"], "running");
        let (_, _, other) = call(
            &router,
            "GET",
            &format!("{INSTANCES}?pool=ns%2Fother"),
            None,
            None,
        )
        .await;
        assert_eq!(other["instances"], serde_json::json!([]));

        let (status, _, deleted) =
            call(&router, "DELETE", &format!("{INSTANCES}/{id}"), None, None).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        assert_eq!(deleted["state"], "terminating");
        tokio::time::timeout(Duration::from_secs(10), cloud.wait_for(<[_]>::is_empty))
            .await
            .expect("gone in time");
        let (status, _, missing) =
            call(&router, "DELETE", &format!("{INSTANCES}/{id}"), None, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(missing["code"], "InstanceNotFound");
    }

    #[tokio::test]
    async fn an_instance_type_is_described_and_an_unknown_one_is_404() {
        let (_, router) = router(instant());
        let (status, _, gpu) = call(&router, "GET", "/v1/instance-types/gpu", None, None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(gpu["capacity"]["nvidia.com/gpu"], "1");
        assert_eq!(gpu["operatingSystem"], "linux");
        let (status, _, unknown) =
            call(&router, "GET", "/v1/instance-types/m5.huge", None, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(unknown["code"], "InvalidInstanceType");
    }

    #[tokio::test]
    async fn requests_get_401_on_every_path_without_the_bearer_token() {
        let (_, router) = router(Settings {
            bearer_token: Some("s3cret".into()),
            ..instant()
        });
        for uri in [INSTANCES, "/nowhere"] {
            let (status, headers, body) = call(&router, "GET", uri, None, None).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}");
            assert!(headers.contains_key(header::WWW_AUTHENTICATE));
            assert_eq!(body["code"], "Unauthorized");
        }
        let (status, _, _) = call(&router, "GET", INSTANCES, None, Some("s3cret")).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn create_gets_413_when_the_body_is_over_the_limit() {
        let (cloud, router) = router(Settings {
            max_body_bytes: 256,
            ..instant()
        });
        let body = create_body("t-0", &[b'#'; 512]);
        let (status, _, error) = call(&router, "POST", INSTANCES, Some(&body), None).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(error["code"], "RequestTooLarge");
        assert_eq!(cloud.total_creations(), 0);
    }

    #[tokio::test]
    async fn create_gets_400_with_a_json_error_when_the_request_is_malformed() {
        let (_, router) = router(instant());
        let mut garbled = create_body("t-0", b"");
        garbled["bootstrapData"] = "not base64!".into();
        let mut unknown_format = create_body("t-0", b"#cloud-config\n");
        unknown_format["bootstrapFormat"] = "floppy".into();
        for (body, code) in [
            (garbled, "InvalidBootstrapData"),
            (unknown_format, "InvalidRequest"),
        ] {
            let (status, _, error) = call(&router, "POST", INSTANCES, Some(&body), None).await;
            assert!(status.is_client_error(), "{code}: {status}");
            assert_eq!(error["code"], code);
            assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
    }

    #[tokio::test]
    async fn create_gets_429_with_retry_after_when_the_cloud_is_full() {
        let (_, router) = router(Settings {
            max_instances: 1,
            ..instant()
        });
        let first = create_body("t-0", b"#cloud-config\n");
        call(&router, "POST", INSTANCES, Some(&first), None).await;
        let second = create_body("t-1", b"#cloud-config\n");
        let (status, headers, error) = call(&router, "POST", INSTANCES, Some(&second), None).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(headers.contains_key(header::RETRY_AFTER));
        assert_eq!(error["code"], "InstanceLimitExceeded");
    }

    #[tokio::test]
    async fn create_makes_a_failed_instance_when_bootstrap_data_cannot_join() {
        let (cloud, router) = router(instant());
        let body = create_body("t-0", b"");
        let (status, _, created) = call(&router, "POST", INSTANCES, Some(&body), None).await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(created["state"], "failed");
        let id = created["id"].as_str().expect("an id");
        assert_eq!(
            cloud.instance(id).and_then(|r| r.join_failure),
            Some(JoinFailure::Empty)
        );
    }

    const CONTROL_PLANE: &str = "/v1/control-planes/ns%2Fcp";

    fn control_plane_body(version: &str, replicas: u32) -> serde_json::Value {
        serde_json::json!({"version": version, "replicas": replicas, "idempotencyKey": "uid-1"})
    }

    #[tokio::test]
    async fn put_creates_a_control_plane_that_get_reports_and_delete_removes() {
        let (cloud, router) = router(instant());
        let body = control_plane_body("v1.36.3", 3);
        let (status, _, created) = call(&router, "PUT", CONTROL_PLANE, Some(&body), None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(created["name"], "ns/cp", "the path's name, decoded");
        assert_eq!(created["version"], "v1.36.3");
        assert_eq!(created["readyReplicas"], 3, "no boot delay");
        assert_eq!(created["upToDateReplicas"], 3);
        assert_eq!(created["initialized"], true);
        assert_eq!(created["endpoint"]["host"], "127.0.0.1");
        let port = created["endpoint"]["port"].as_u64().expect("a port");
        assert!(cloud.control_plane("ns/cp").is_some());

        let (status, _, again) = call(&router, "PUT", CONTROL_PLANE, Some(&body), None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(again["endpoint"]["port"], port, "the port is kept");
        let (status, _, got) = call(&router, "GET", CONTROL_PLANE, None, None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(got, again);

        let (status, _, deleted) = call(&router, "DELETE", CONTROL_PLANE, None, None).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        assert_eq!(deleted["name"], "ns/cp");
        for method in ["GET", "DELETE"] {
            let (status, _, missing) = call(&router, method, CONTROL_PLANE, None, None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method}");
            assert_eq!(missing["code"], "ControlPlaneNotFound");
        }
        assert!(cloud.control_planes().is_empty());
    }

    #[tokio::test]
    async fn control_plane_replicas_come_up_after_the_boot_delay() {
        let (cloud, router) = router(Settings {
            boot_delay: Duration::from_millis(20),
            ..instant()
        });
        let body = control_plane_body("v1.36.3", 2);
        let (_, _, created) = call(&router, "PUT", CONTROL_PLANE, Some(&body), None).await;
        assert_eq!(created["replicas"], 2);
        assert_eq!(created["readyReplicas"], 0);
        assert_eq!(created["initialized"], false);
        assert_eq!(created["oldestVersion"], serde_json::Value::Null);
        let mut changes = cloud.subscribe();
        let ready = async {
            while cloud
                .control_plane("ns/cp")
                .is_none_or(|plane| plane.ready_replicas < 2)
            {
                changes.changed().await.expect("the cloud lives");
            }
        };
        tokio::time::timeout(Duration::from_secs(10), ready)
            .await
            .expect("ready in time");
        let (_, _, got) = call(&router, "GET", CONTROL_PLANE, None, None).await;
        assert_eq!(got["availableReplicas"], 2);
        assert_eq!(got["initialized"], true);
        assert_eq!(got["oldestVersion"], "v1.36.3");
    }

    #[tokio::test]
    async fn a_new_version_rolls_one_replica_per_get_or_put() {
        let (_, router) = router(instant());
        let old = control_plane_body("v1.35.2", 3);
        call(&router, "PUT", CONTROL_PLANE, Some(&old), None).await;
        let new = control_plane_body("v1.36.0", 3);
        let (_, _, changed) = call(&router, "PUT", CONTROL_PLANE, Some(&new), None).await;
        assert_eq!(changed["version"], "v1.36.0");
        assert_eq!(changed["upToDateReplicas"], 0);
        assert_eq!(changed["oldestVersion"], "v1.35.2");
        let (_, _, one) = call(&router, "GET", CONTROL_PLANE, None, None).await;
        assert_eq!(one["upToDateReplicas"], 1);
        let (_, _, two) = call(&router, "PUT", CONTROL_PLANE, Some(&new), None).await;
        assert_eq!(two["upToDateReplicas"], 2);
        let (_, _, three) = call(&router, "GET", CONTROL_PLANE, None, None).await;
        assert_eq!(three["upToDateReplicas"], 3);
        assert_eq!(three["readyReplicas"], 3);
        assert_eq!(three["oldestVersion"], "v1.36.0");
    }

    #[tokio::test]
    async fn put_control_plane_is_refused_with_a_json_error() {
        let (cloud, router) = router(Settings {
            max_control_planes: 1,
            ..instant()
        });
        let mut no_key = control_plane_body("v1.36.3", 1);
        no_key
            .as_object_mut()
            .map(|body| body.remove("idempotencyKey"));
        for (body, status, code) in [
            (
                control_plane_body("1.36.3", 1),
                StatusCode::BAD_REQUEST,
                "InvalidParameter",
            ),
            (
                control_plane_body("v1.36", 1),
                StatusCode::BAD_REQUEST,
                "InvalidParameter",
            ),
            (
                control_plane_body("v1.36.3", 0),
                StatusCode::BAD_REQUEST,
                "InvalidParameter",
            ),
            (no_key, StatusCode::UNPROCESSABLE_ENTITY, "InvalidRequest"),
        ] {
            let (got, _, error) = call(&router, "PUT", CONTROL_PLANE, Some(&body), None).await;
            assert_eq!(
                (got, error["code"].as_str()),
                (status, Some(code)),
                "{body}"
            );
            assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
        }
        assert!(cloud.control_planes().is_empty());

        call(
            &router,
            "PUT",
            CONTROL_PLANE,
            Some(&control_plane_body("v1.36.3", 1)),
            None,
        )
        .await;
        let older = control_plane_body("v1.35.9", 1);
        let (status, _, error) = call(&router, "PUT", CONTROL_PLANE, Some(&older), None).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(error["code"], "VersionDowngrade");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("downgrade"))
        );
        let mut other_key = control_plane_body("v1.36.3", 1);
        other_key["idempotencyKey"] = "uid-2".into();
        let (status, _, error) = call(&router, "PUT", CONTROL_PLANE, Some(&other_key), None).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(error["code"], "ControlPlaneNameInUse");
        let second = control_plane_body("v1.36.3", 1);
        let (status, headers, error) = call(
            &router,
            "PUT",
            "/v1/control-planes/ns%2Fother",
            Some(&second),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(headers.contains_key(header::RETRY_AFTER));
        assert_eq!(error["code"], "ControlPlaneLimitExceeded");
    }

    #[test]
    fn bearer_matches_only_the_exact_token_with_any_scheme_case() {
        let matches =
            |value: &'static str| bearer_matches(Some(&HeaderValue::from_static(value)), "s3cret");
        assert!(matches("Bearer s3cret"));
        assert!(matches("bearer s3cret"));
        assert!(!matches("Bearer s3cre"));
        assert!(!matches("Bearer s3cret "));
        assert!(!matches("Basic s3cret"));
        assert!(!matches("Bearer"));
        assert!(!bearer_matches(None, "s3cret"));
    }

    #[test]
    fn refusal_maps_to_status_and_code() {
        let cases = [
            (
                Refusal::InvalidParameter {
                    field: "pool",
                    problem: "is bad",
                },
                StatusCode::BAD_REQUEST,
                "InvalidParameter",
            ),
            (
                Refusal::TokenReused {
                    token: "t".into(),
                    id: "i-1".into(),
                },
                StatusCode::BAD_REQUEST,
                "IdempotentParameterMismatch",
            ),
            (
                Refusal::InstanceLimit { max: 1 },
                StatusCode::TOO_MANY_REQUESTS,
                "InstanceLimitExceeded",
            ),
        ];
        for (refusal, status, code) in cases {
            let error = ApiError::from(refusal);
            assert_eq!((error.status, error.code), (status, code));
        }
    }

    #[test]
    fn instance_limit_tells_the_client_when_to_retry() {
        let error = ApiError::from(Refusal::InstanceLimit { max: 1 });
        assert_eq!(
            error.headers.get(header::RETRY_AFTER),
            Some(&HeaderValue::from(
                crate::api_error::FULL_RETRY_AFTER_SECONDS
            ))
        );
    }
}
