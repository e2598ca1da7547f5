//! Errors as one line for people: the message and each cause after it.

/// `error` and its sources joined with `: ` — for a log field, a condition
/// message, an HTTP error body or a CLI's last line, where a reader has no
/// other way to see the cause.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// `text` cut to at most `max` bytes, on a char boundary (API fields such
/// as condition messages and Event notes have size limits).
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("loading provider failed")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn error_chain_names_every_cause_once() {
        let error = Outer(std::io::Error::other("disk on fire"));
        assert_eq!(error_chain(&error), "loading provider failed: disk on fire");
    }
}
