//! `capwasm:provider/log`: guest log lines into the host's tracing output,
//! attributed to the provider and bounded per call.

use super::super::bindings::log::{Host, Level};
use super::super::bounds::{
    MAX_LOG_FIELDS, MAX_LOG_KEY_BYTES, MAX_LOG_MESSAGE_BYTES, MAX_LOG_VALUE_BYTES,
};
use super::super::state::CallState;
use super::super::text;

impl Host for CallState {
    fn log(&mut self, level: Level, message: String, fields: Vec<(String, String)>) {
        if is_panic(level, &fields) {
            // Kept whatever the budget, and not logged: it belongs in the
            // trap error that follows, which whoever called reports.
            self.panic_message = Some(text::clean(&message, MAX_LOG_MESSAGE_BYTES));
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
        let message = text::clean(&message, MAX_LOG_MESSAGE_BYTES);
        let fields: Vec<String> = fields
            .iter()
            .take(MAX_LOG_FIELDS)
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    text::clean(k, MAX_LOG_KEY_BYTES),
                    text::clean(v, MAX_LOG_VALUE_BYTES)
                )
            })
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
