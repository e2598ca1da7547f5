//! `capwasm:provider/log`: guest log lines into the host's tracing output,
//! attributed to the provider and bounded per call.

use super::super::bindings::log::{Host, Level};
use super::super::state::CallState;

/// A longer message is cut; a guest must not fill the host's logs.
const MAX_MESSAGE_BYTES: usize = 2048;
const MAX_FIELDS: usize = 16;

impl Host for CallState {
    fn log(&mut self, level: Level, message: String, fields: Vec<(String, String)>) {
        if is_panic(level, &fields) {
            // Kept whatever the budget, and not logged: it belongs in the
            // trap error that follows, which whoever called reports.
            self.panic_message = Some(truncate(&message, MAX_MESSAGE_BYTES).to_owned());
            return;
        }
        if self.log_lines_left == 0 {
            self.log_lines_dropped += 1;
            return;
        }
        self.log_lines_left -= 1;
        // Formatting the fields allocates; a line the subscriber drops
        // (most guest lines, at the default level) must not cost that.
        let enabled = match level {
            Level::Trace => tracing::enabled!(target: "capwasm::guest", tracing::Level::TRACE),
            Level::Debug => tracing::enabled!(target: "capwasm::guest", tracing::Level::DEBUG),
            Level::Info => tracing::enabled!(target: "capwasm::guest", tracing::Level::INFO),
            Level::Warn => tracing::enabled!(target: "capwasm::guest", tracing::Level::WARN),
            Level::Error => tracing::enabled!(target: "capwasm::guest", tracing::Level::ERROR),
        };
        if !enabled {
            return;
        }
        let message = truncate(&message, MAX_MESSAGE_BYTES);
        let fields: Vec<String> = fields
            .iter()
            .take(MAX_FIELDS)
            .map(|(k, v)| format!("{}={}", truncate(k, 64), truncate(v, 256)))
            .collect();
        let fields = fields.join(" ");
        let provider = &*self.provider;
        match level {
            Level::Trace => {
                tracing::trace!(target: "capwasm::guest", provider, fields, "{message}");
            }
            Level::Debug => {
                tracing::debug!(target: "capwasm::guest", provider, fields, "{message}");
            }
            Level::Info => tracing::info!(target: "capwasm::guest", provider, fields, "{message}"),
            Level::Warn => tracing::warn!(target: "capwasm::guest", provider, fields, "{message}"),
            Level::Error => {
                tracing::error!(target: "capwasm::guest", provider, fields, "{message}");
            }
        }
    }
}

/// The panic marker of `log.wit`: error level, one field of empty strings.
fn is_panic(level: Level, fields: &[(String, String)]) -> bool {
    level == Level::Error && matches!(fields, [(k, v)] if k.is_empty() && v.is_empty())
}

impl super::super::bindings::types::Host for CallState {}

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
