//! The EC2 Query API over the SDK's HTTP client.
//!
//! Requests go out unsigned: the host signs them (AWS `SigV4`, configured in
//! the ProviderModule) with keys this provider never sees. What EC2
//! answers is turned into [`ProviderError`]s here, in one place: throttling,
//! 5xx, transport failures and unreadable answers are retried, refused
//! credentials and other client errors are terminal.

pub mod model;
pub mod query;
pub mod xml;

use capwasm_provider_sdk::http::Request;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;
use roxmltree::Node;

use model::Page;
use query::Query;
pub use xml::ApiError;

/// Retry delays, by cause.
const RETRY_THROTTLED: u32 = 10;
const RETRY_UNAVAILABLE: u32 = 5;
const RETRY_UNREADABLE: u32 = 5;
const RETRY_CAPACITY: u32 = 30;
/// Pages one Describe may take; the request budget of a call is 100.
const MAX_PAGES: usize = 20;
/// The largest answer read: a page of 100 instances is well under 1 MiB,
/// and the parsed tree of a body takes several times its size in memory.
const MAX_RESPONSE_BYTES: usize = 4 << 20;
/// Characters of EC2's message kept in an error (some list every zone).
const MAX_MESSAGE_CHARS: usize = 400;

/// Codes that mean: too many requests now, or EC2 itself is in trouble.
const THROTTLING: [&str; 4] = [
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "RequestThrottled",
];
const UNAVAILABLE: [&str; 5] = [
    "ServiceUnavailable",
    "Unavailable",
    "InternalError",
    "InternalFailure",
    "RequestExpired",
];
const NO_CAPACITY: [&str; 3] = [
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientFreeAddressesInSubnet",
];
const UNAUTHORIZED: [&str; 6] = [
    "AuthFailure",
    "UnauthorizedOperation",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "MissingAuthenticationToken",
    "IncompleteSignature",
];

/// A call that failed.
#[derive(Debug)]
pub enum Error {
    /// EC2 answered with an error; callers may handle some codes.
    Api(Failure),
    /// No usable answer (transport, unreadable body), already classified.
    Failed(ProviderError),
}

/// An error answer and what it answered.
#[derive(Debug)]
pub struct Failure {
    pub action: &'static str,
    pub host: String,
    pub status: u16,
    pub error: ApiError,
}

impl Error {
    /// The EC2 error code, if EC2 answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api(failure) => Some(&failure.error.code),
            Self::Failed(_) => None,
        }
    }

    /// The EC2 error message, if EC2 answered with one.
    pub fn message(&self) -> &str {
        match self {
            Self::Api(failure) => &failure.error.message,
            Self::Failed(error) => error.message(),
        }
    }
}

impl From<Error> for ProviderError {
    fn from(err: Error) -> Self {
        match err {
            Error::Failed(error) => error,
            Error::Api(failure) => failure.into(),
        }
    }
}

impl From<Failure> for ProviderError {
    fn from(failure: Failure) -> Self {
        let Failure {
            action,
            host,
            status,
            error: ApiError { code, message },
        } = failure;
        let message = clip(&message);
        let said = format!("EC2 at {host} answered {action} with {status} {code}: {message}");
        let code = code.as_str();
        if THROTTLING.contains(&code) {
            ProviderError::retry_after(RETRY_THROTTLED, format!("throttled: {said}"))
        } else if NO_CAPACITY.contains(&code) {
            ProviderError::retry_after(RETRY_CAPACITY, said)
        } else if UNAVAILABLE.contains(&code) || status >= 500 {
            ProviderError::retry_after(RETRY_UNAVAILABLE, said)
        } else if UNAUTHORIZED.contains(&code) || status == 401 || status == 403 {
            unauthorized(&host, &said)
        } else if code.starts_with("InvalidAMIID.") {
            ProviderError::invalid_config("$.ami", said)
        } else {
            ProviderError::terminal(reason(code), said)
        }
    }
}

fn unauthorized(host: &str, said: &str) -> ProviderError {
    ProviderError::terminal(
        "Unauthorized",
        format!(
            "{said} (the host signs requests to {host} with the keys of the ProviderModule's credentials Secret; check its requestAuth, the keys and their permissions)"
        ),
    )
}

/// A CamelCase reason from an EC2 code: `InvalidVpcID.NotFound` →
/// `InvalidVpcIDNotFound`.
fn reason(code: &str) -> String {
    let reason: String = code.chars().filter(char::is_ascii_alphanumeric).collect();
    if reason.is_empty() {
        "Ec2Error".to_owned()
    } else {
        reason
    }
}

fn clip(message: &str) -> String {
    let mut chars = message.chars();
    let mut clipped: String = chars.by_ref().take(MAX_MESSAGE_CHARS).collect();
    if chars.next().is_some() {
        clipped.push('…');
    }
    clipped
}

/// Calls one EC2 endpoint.
pub struct Client {
    url: String,
    host: String,
}

impl Client {
    /// `url` receives the requests; `host` names it in messages.
    pub fn new(url: String, host: String) -> Self {
        Self { url, host }
    }

    /// The endpoint's `host[:port]`, for messages.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Sends `query` and reads the answer with `read`.
    pub fn call<T>(
        &self,
        query: &Query,
        read: impl FnOnce(Node<'_, '_>) -> Result<T, String>,
    ) -> Result<T, Error> {
        let action = query.action();
        let response = Request::post(self.url.as_str())
            .header(
                "content-type",
                "application/x-www-form-urlencoded; charset=utf-8",
            )
            .body(query.encode())
            .max_response_bytes(MAX_RESPONSE_BYTES)
            .send()
            .map_err(|err| Error::Failed(err.into()))?;
        let status = response.status;
        let body = String::from_utf8_lossy(&response.body);
        if response.is_success() {
            return xml::parse(action, &body, read).map_err(|why| {
                Error::Failed(ProviderError::retry_after(
                    RETRY_UNREADABLE,
                    format!(
                        "EC2 at {} answered {action} with {status} and a body that cannot be read ({why})",
                        self.host
                    ),
                ))
            });
        }
        if let Some(error) = xml::error(&body) {
            return Err(Error::Api(Failure {
                action,
                host: self.host.clone(),
                status,
                error,
            }));
        }
        // No EC2 error in the body: a proxy, or something that is not EC2.
        let said = format!(
            "EC2 at {} answered {action} with {status} and no EC2 error ({})",
            self.host,
            clip(body.trim())
        );
        Err(Error::Failed(match status {
            401 | 403 => unauthorized(&self.host, &said),
            _ => match response.status_error() {
                ProviderError::RetryAfter(retry) => ProviderError::retry_after(retry.seconds, said),
                ProviderError::Terminal(terminal) => ProviderError::terminal(terminal.reason, said),
                ProviderError::InvalidConfig(_) => ProviderError::terminal("RequestRejected", said),
            },
        }))
    }

    /// Every page of a Describe call, following `NextToken`. `max_results`
    /// sets the page size where the action takes one with filters.
    pub fn describe<T>(
        &self,
        query: &Query,
        max_results: Option<u32>,
        read: fn(Node<'_, '_>) -> Result<Page<T>, String>,
    ) -> Result<Vec<T>, Error> {
        let mut all = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut page_query = query.clone();
            if let Some(max) = max_results {
                page_query = page_query.param("MaxResults", max.to_string());
            }
            if let Some(token) = &token {
                page_query = page_query.param("NextToken", token.as_str());
            }
            let page = self.call(&page_query, read)?;
            all.extend(page.items);
            match page.next_token {
                None => return Ok(all),
                Some(next) if token.as_ref() == Some(&next) => {
                    return Err(self.unreadable(query, "the same NextToken twice"));
                }
                next => token = next,
            }
        }
        Err(self.unreadable(query, "more than 20 pages"))
    }

    fn unreadable(&self, query: &Query, what: &str) -> Error {
        Error::Failed(ProviderError::retry_after(
            RETRY_UNREADABLE,
            format!(
                "EC2 at {} answered {} with {what}",
                self.host,
                query.action()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(status: u16, code: &str) -> ProviderError {
        Failure {
            action: "RunInstances",
            host: "127.0.0.1:5000".to_owned(),
            status,
            error: ApiError {
                code: code.to_owned(),
                message: "because".to_owned(),
            },
        }
        .into()
    }

    #[test]
    fn throttling_and_server_errors_are_retried_with_the_cause() {
        for (status, code, seconds) in [
            (503, "RequestLimitExceeded", RETRY_THROTTLED),
            (400, "Throttling", RETRY_THROTTLED),
            (503, "ServiceUnavailable", RETRY_UNAVAILABLE),
            (500, "SomethingNew", RETRY_UNAVAILABLE),
            (500, "InsufficientInstanceCapacity", RETRY_CAPACITY),
        ] {
            let error = failure(status, code);
            assert!(
                matches!(&error, ProviderError::RetryAfter(e)
                    if e.seconds == seconds && e.message.contains(code) && e.message.contains("because")),
                "{code}: {error:?}"
            );
        }
    }

    #[test]
    fn refused_credentials_are_terminal_and_name_the_host() {
        for (status, code) in [
            (401, "AuthFailure"),
            (403, "UnauthorizedOperation"),
            (403, "Whatever"),
        ] {
            let error = failure(status, code);
            assert!(
                matches!(&error, ProviderError::Terminal(e)
                    if e.reason == "Unauthorized" && e.message.contains("127.0.0.1:5000")),
                "{code}: {error:?}"
            );
        }
    }

    #[test]
    fn bad_images_are_invalid_config_of_ami() {
        let error = failure(400, "InvalidAMIID.NotFound");
        assert!(
            matches!(&error, ProviderError::InvalidConfig(e) if e.path == "$.ami"),
            "{error:?}"
        );
    }

    #[test]
    fn other_client_errors_are_terminal_with_a_camel_case_reason() {
        let error = failure(400, "InvalidVpcID.NotFound");
        assert!(
            matches!(&error, ProviderError::Terminal(e) if e.reason == "InvalidVpcIDNotFound"),
            "{error:?}"
        );
        assert_eq!(reason("..."), "Ec2Error");
    }

    #[test]
    fn long_messages_are_clipped() {
        let long = "x".repeat(1000);
        assert_eq!(clip(&long).chars().count(), MAX_MESSAGE_CHARS + 1);
        assert_eq!(clip("short"), "short");
    }
}
