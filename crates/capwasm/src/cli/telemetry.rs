//! Logs and traces: one line per event on stderr, at the level `RUST_LOG`
//! or `--log-level` sets, and, with `--otlp-endpoint`, every span sent to
//! an OpenTelemetry collector over OTLP (http/protobuf).

use std::io::IsTerminal as _;
use std::time::Duration;

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use reqwest::Url;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use super::LogFormat;

/// How long one export to the collector may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The path OTLP/HTTP receivers take traces at.
const TRACES_PATH: &str = "/v1/traces";

/// The filter in force: `RUST_LOG` when it is set (it is the more specific:
/// whoever sets it in a pod's environment means it over the Deployment's
/// flags), else `--log-level`, else the command's default.
pub(super) fn filter_directives<'a>(
    rust_log: Option<&'a str>,
    log_level: Option<&'a str>,
    default: &'a str,
) -> &'a str {
    rust_log
        .filter(|v| !v.trim().is_empty())
        .or(log_level)
        .unwrap_or(default)
}

/// Checks a `--log-level`: a level or a filter directive (`info,kube=warn`).
pub(super) fn parse_log_level(value: &str) -> Result<String, String> {
    EnvFilter::builder()
        .parse(value)
        .map(|_| value.to_owned())
        .map_err(|e| {
            format!("{e}: give error, warn, info, debug or trace, or a directive such as info,capwasm=debug")
        })
}

/// Checks an `--otlp-endpoint`: an `http` or `https` URL; the collector's
/// base URL (`http://collector:4318`) takes traces at `/v1/traces`.
pub(super) fn parse_otlp_endpoint(value: &str) -> Result<String, String> {
    otlp_url(value).map(|_| value.to_owned())
}

fn otlp_url(value: &str) -> Result<Url, String> {
    let url = Url::parse(value).map_err(|e| format!("{e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("an http:// or https:// URL such as http://collector:4318".into());
    }
    Ok(url)
}

/// Where traces are sent: `endpoint`, at `/v1/traces` unless it names that path.
fn traces_url(endpoint: &Url) -> String {
    let base = endpoint.as_str().trim_end_matches('/');
    if endpoint.path().ends_with(TRACES_PATH) {
        base.to_owned()
    } else {
        format!("{base}{TRACES_PATH}")
    }
}

/// What [`init`] started: the trace export, flushed by [`Telemetry::shutdown`].
#[must_use = "shut it down at exit, or the last spans are lost"]
pub(super) struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Sends the spans still waiting and stops the export.
    pub(super) fn shutdown(self) {
        if let Some(traces) = self.traces
            && let Err(error) = traces.shutdown()
        {
            eprintln!("warning: the last spans could not be sent to the OTLP endpoint: {error}");
        }
    }
}

/// Logs at `directives`, in `format`, to stderr; and spans to `otlp`, if given.
pub(super) fn init(
    format: LogFormat,
    directives: &str,
    otlp: Option<&str>,
) -> anyhow::Result<Telemetry> {
    // A directive that does not parse (a bad RUST_LOG) leaves the rest in force.
    let filter = EnvFilter::builder().parse_lossy(directives);
    // Colours only for a person at a terminal: escapes in a file or a log
    // collector are noise.
    let ansi = std::io::stderr().is_terminal();
    let lines: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Human => Box::new(
            tracing_subscriber::fmt::layer()
                .with_ansi(ansi)
                .with_writer(std::io::stderr),
        ),
        LogFormat::Json => Box::new(
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(std::io::stderr),
        ),
    };
    let traces = otlp
        .map(|endpoint| {
            let url = otlp_url(endpoint)
                .map_err(|e| anyhow::anyhow!("--otlp-endpoint {endpoint}: {e}"))?;
            exporter(&url)
        })
        .transpose()?;
    let spans = traces
        .as_ref()
        .map(|provider| tracing_opentelemetry::layer().with_tracer(provider.tracer("capwasm")));
    // A second initialisation (tests calling in) keeps the first.
    let _ = tracing_subscriber::registry()
        .with(lines)
        .with(spans)
        .with(filter)
        .try_init();
    Ok(Telemetry { traces })
}

/// Spans in batches to `endpoint` over OTLP/HTTP (protobuf), from a thread
/// of the SDK's own with a blocking client: it needs no async runtime, so
/// the spans of start-up and shut-down are sent too.
fn exporter(endpoint: &Url) -> anyhow::Result<SdkTracerProvider> {
    // reqwest is built without a default TLS backend; the process's rustls
    // provider is ring, as for every other client here.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::blocking::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .user_agent(concat!("capwasm/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("cannot build the OTLP client")?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(traces_url(endpoint))
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .with_context(|| format!("cannot export traces to {endpoint}"))?;
    Ok(SdkTracerProvider::builder()
        .with_resource(
            Resource::builder_empty()
                .with_service_name("capwasm")
                .build(),
        )
        .with_batch_exporter(exporter)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_wins_over_log_level_which_wins_over_the_default() {
        assert_eq!(
            filter_directives(Some("warn"), Some("debug"), "info"),
            "warn"
        );
        assert_eq!(filter_directives(None, Some("debug"), "info"), "debug");
        // An empty RUST_LOG is not set.
        assert_eq!(filter_directives(Some(" "), Some("debug"), "info"), "debug");
        assert_eq!(filter_directives(None, None, "info"), "info");
    }

    #[test]
    fn log_level_is_a_level_or_a_directive() {
        for good in ["error", "debug", "info,capwasm=debug", "kube_runtime=trace"] {
            assert_eq!(parse_log_level(good).as_deref(), Ok(good));
        }
        assert!(parse_log_level("info,capwasm=loud").is_err());
    }

    #[test]
    fn otlp_endpoint_takes_traces_at_v1_traces() {
        let url = |s| otlp_url(s).unwrap();
        assert_eq!(
            traces_url(&url("http://collector:4318")),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url(&url("https://collector.example/otlp/")),
            "https://collector.example/otlp/v1/traces"
        );
        assert_eq!(
            traces_url(&url("http://collector:4318/v1/traces")),
            "http://collector:4318/v1/traces"
        );
        assert!(parse_otlp_endpoint("collector:4318").is_err());
        assert!(parse_otlp_endpoint("ftp://collector").is_err());
    }
}
