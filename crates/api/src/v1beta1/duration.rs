//! Go's `time.Duration` in its text form (`1h2m3.5s`), as v1beta1's
//! `metav1.Duration` fields hold it: read with Go's syntax and written as Go
//! writes it, so that a value a Go client wrote reads back equal.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

const MICROSECOND: u64 = 1_000;
const MILLISECOND: u64 = 1_000_000;
const SECOND: u64 = 1_000_000_000;

/// A span of time in nanoseconds (Go's `time.Duration`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Duration(i64);

/// A text that is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a duration such as \"1h2m3s\"")]
pub struct DurationError(String);

impl Duration {
    /// `seconds` whole seconds (upstream's `ConvertFromSeconds`).
    pub fn from_seconds(seconds: i32) -> Self {
        // |i32| * 10^9 < 2^62: no overflow.
        Self(i64::from(seconds) * SECOND.cast_signed())
    }

    /// `nanos` nanoseconds.
    pub fn from_nanos(nanos: i64) -> Self {
        Self(nanos)
    }

    /// The span in nanoseconds.
    pub fn nanos(self) -> i64 {
        self.0
    }

    /// Whole seconds, truncated toward zero and capped to the range of an
    /// `int32` (upstream's `ConvertToSeconds`).
    pub fn whole_seconds(self) -> i32 {
        let seconds = self.0 / SECOND.cast_signed();
        i32::try_from(seconds).unwrap_or(if seconds < 0 { i32::MIN } else { i32::MAX })
    }

    /// Reads Go's syntax (`time.ParseDuration`): an optional sign, then
    /// decimal numbers each with a unit of `ns`, `us`, `µs`, `ms`, `s`, `m`
    /// or `h`, such as `300ms`, `-1.5h` or `2h45m`; `0` alone is zero.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let error = || DurationError(text.to_owned());
        let mut rest = text;
        let mut negative = false;
        if let Some(unsigned) = rest.strip_prefix('-') {
            negative = true;
            rest = unsigned;
        } else if let Some(unsigned) = rest.strip_prefix('+') {
            rest = unsigned;
        }
        if rest == "0" {
            return Ok(Self(0));
        }
        if rest.is_empty() {
            return Err(error());
        }
        let mut total: u64 = 0;
        while !rest.is_empty() {
            if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
                return Err(error());
            }
            let (whole, after_whole) = leading_int(rest).ok_or_else(error)?;
            let has_whole = after_whole.len() != rest.len();
            rest = after_whole;
            let (mut fraction, mut scale, mut has_fraction) = (0, 1, false);
            if let Some(after_dot) = rest.strip_prefix('.') {
                let (digits, digits_scale, after_fraction) = leading_fraction(after_dot);
                has_fraction = after_fraction.len() != after_dot.len();
                (fraction, scale) = (digits, digits_scale);
                rest = after_fraction;
            }
            if !has_whole && !has_fraction {
                return Err(error());
            }
            let unit_end = rest
                .find(|c: char| c == '.' || c.is_ascii_digit())
                .unwrap_or(rest.len());
            let unit = unit(&rest[..unit_end]).ok_or_else(error)?;
            rest = &rest[unit_end..];
            let mut value = whole.checked_mul(unit).ok_or_else(error)?;
            if fraction > 0 {
                // fraction < 2^63 and unit < 2^42: the product fits in u128.
                let part = u128::from(fraction) * u128::from(unit) / scale;
                value = u64::try_from(part)
                    .ok()
                    .and_then(|part| value.checked_add(part))
                    .ok_or_else(error)?;
            }
            total = total
                .checked_add(value)
                .filter(|total| *total <= 1 << 63)
                .ok_or_else(error)?;
        }
        if negative {
            // total <= 2^63, so its negation fits.
            return i64::try_from(-i128::from(total))
                .map(Self)
                .map_err(|_| error());
        }
        i64::try_from(total).map(Self).map_err(|_| error())
    }
}

/// The leading decimal digits of `text` and what follows; `None` on overflow.
fn leading_int(text: &str) -> Option<(u64, &str)> {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let mut value: u64 = 0;
    for digit in text[..end].bytes() {
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(digit - b'0'))
            .filter(|v| *v <= 1 << 63)?;
    }
    Some((value, &text[end..]))
}

/// The digits after a decimal point as a number and its scale (10 to the
/// number of digits kept), and what follows; digits past what fits are
/// dropped, as Go does.
fn leading_fraction(text: &str) -> (u64, u128, &str) {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (mut value, mut scale, mut overflow) = (0u64, 1u128, false);
    for digit in text[..end].bytes() {
        if overflow {
            continue;
        }
        if value > ((1 << 63) - 1) / 10 {
            overflow = true;
            continue;
        }
        let next = value * 10 + u64::from(digit - b'0');
        if next > 1 << 63 {
            overflow = true;
            continue;
        }
        value = next;
        scale *= 10;
    }
    (value, scale, &text[end..])
}

fn unit(name: &str) -> Option<u64> {
    Some(match name {
        "ns" => 1,
        "us" | "µs" | "μs" => MICROSECOND,
        "ms" => MILLISECOND,
        "s" => SECOND,
        "m" => 60 * SECOND,
        "h" => 3600 * SECOND,
        _ => return None,
    })
}

/// `.` and the digits of `fraction` (of `digits` places) without trailing
/// zeros; nothing when it is zero.
fn fraction(fraction: u64, digits: usize) -> String {
    if fraction == 0 {
        return String::new();
    }
    let padded = format!("{fraction:0digits$}");
    format!(".{}", padded.trim_end_matches('0'))
}

/// Go's `Duration.String`: `72h3m0.5s`, `1.5s`, `300ms`, `0s`.
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let nanos = self.0.unsigned_abs();
        if nanos == 0 {
            return f.write_str("0s");
        }
        if nanos < SECOND {
            let (whole, rest, digits, unit) = if nanos < MICROSECOND {
                (nanos, 0, 0, "ns")
            } else if nanos < MILLISECOND {
                (nanos / MICROSECOND, nanos % MICROSECOND, 3, "µs")
            } else {
                (nanos / MILLISECOND, nanos % MILLISECOND, 6, "ms")
            };
            return write!(f, "{sign}{whole}{}{unit}", fraction(rest, digits));
        }
        let seconds = nanos / SECOND;
        let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
        let last = format!("{}{}s", seconds % 60, fraction(nanos % SECOND, 9));
        if hours > 0 {
            write!(f, "{sign}{hours}h{minutes}m{last}")
        } else if minutes > 0 {
            write!(f, "{sign}{minutes}m{last}")
        } else {
            write!(f, "{sign}{last}")
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<str>::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_as_go_does() {
        for (nanos, text) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (1_500_000_000, "1.5s"),
            (10_000_000_000, "10s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (-5_000_000_000, "-5s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(Duration(nanos).to_string(), text);
        }
    }

    #[test]
    fn reads_what_go_reads() {
        for (text, nanos) in [
            ("0", 0),
            ("+0", 0),
            ("10s", 10_000_000_000),
            ("1.5s", 1_500_000_000),
            (".5s", 500_000_000),
            ("1.s", 1_000_000_000),
            ("2h45m", 9_900_000_000_000),
            ("-1m30s", -90_000_000_000),
            ("300ms", 300_000_000),
            ("1us", 1_000),
            ("1µs", 1_000),
            ("1μs", 1_000),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("0.333333333333333333333s", 333_333_333),
        ] {
            assert_eq!(Duration::parse(text), Ok(Duration(nanos)), "{text}");
        }
    }

    #[test]
    fn refuses_what_go_refuses() {
        for text in [
            "",
            "-",
            "s",
            ".s",
            "10",
            "1d",
            "1 s",
            "1s ",
            "9223372036854775808ns",
            "3000000h",
        ] {
            assert_eq!(
                Duration::parse(text),
                Err(DurationError(text.into())),
                "{text}"
            );
        }
    }

    #[test]
    fn whole_seconds_truncate_and_cap_as_upstream() {
        assert_eq!(Duration(1_999_999_999).whole_seconds(), 1);
        assert_eq!(Duration(-1_999_999_999).whole_seconds(), -1);
        assert_eq!(Duration(i64::MAX).whole_seconds(), i32::MAX);
        assert_eq!(Duration(i64::MIN).whole_seconds(), i32::MIN);
        assert_eq!(Duration::from_seconds(i32::MAX).whole_seconds(), i32::MAX);
    }

    #[test]
    fn text_round_trips() {
        for nanos in [0, 1, 999, 1_001, 59_999_999_999, 3_723_000_000_001, -42] {
            let text = Duration(nanos).to_string();
            assert_eq!(Duration::parse(&text), Ok(Duration(nanos)), "{text}");
        }
    }
}
