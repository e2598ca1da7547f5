//! Errors as one line for people: the message and each cause after it.

/// `error` and its sources joined with `: ` — for a log field, a condition
/// message or an HTTP error body, where a reader has no other way to see the
/// cause. Each cause is said once: some errors (kube's, hyper's) end with
/// the text of the cause after them.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    chain(error, |text| text)
}

/// [`error_chain`] with each cause cut to its first line, for a CLI's last
/// line: a few causes span lines (YAML errors quote the input).
pub fn one_line(error: &dyn std::error::Error) -> String {
    chain(error, |text| text.lines().next().unwrap_or_default().trim())
}

fn chain(error: &dyn std::error::Error, shown: impl Fn(&str) -> &str) -> String {
    let mut line = String::new();
    let mut cause = Some(error);
    while let Some(error) = cause {
        let text = error.to_string();
        let text = shown(&text);
        if !text.is_empty() && !line.ends_with(text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(text);
        }
        cause = error.source();
    }
    line
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

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect): connection refused")]
    struct Repeats(#[source] std::io::Error);

    #[test]
    fn error_chain_names_every_cause_once() {
        let error = Outer(std::io::Error::other("disk on fire"));
        assert_eq!(error_chain(&error), "loading provider failed: disk on fire");
        let error = Repeats(std::io::Error::other("connection refused"));
        assert_eq!(
            error_chain(&error),
            "client error (Connect): connection refused"
        );
    }
}
