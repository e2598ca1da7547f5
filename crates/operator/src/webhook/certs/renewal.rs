//! When the certificates are renewed: a pure decision over what the Secret
//! holds and the time, so that it can be read off one `match` and tested
//! without a server.
//!
//! A certificate is renewed once less than a third of its validity remains
//! (the serving certificate of a year about four months ahead, the CA of
//! ten years about three years ahead). A new CA is added to the bundle the
//! API server trusts and only later signs a serving certificate, so that no
//! replica serves a certificate the API server does not trust yet.

/// When a certificate is valid, in seconds since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Period {
    /// Its start.
    pub not_before: i64,
    /// Its end.
    pub not_after: i64,
}

impl Period {
    /// When it is due for renewal: once less than a third of it remains.
    pub fn renew_at(self) -> i64 {
        let length = self.not_after.saturating_sub(self.not_before).max(0);
        self.not_after.saturating_sub(length / 3)
    }

    fn due(self, now: i64) -> bool {
        now >= self.renew_at()
    }

    fn expired(self, now: i64) -> bool {
        now >= self.not_after
    }
}

/// What the Secret holds, as far as renewal goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    /// Whether capwasm made it (its CA is capwasm's): only then is it renewed.
    pub ours: bool,
    /// The CA whose key it keeps (`ca.key`, of the first certificate of
    /// `ca.crt`); none in a Secret of an older version, which kept no key.
    pub signer: Option<Period>,
    /// The serving certificate (an expired period when it cannot be read).
    pub serving: Period,
    /// Whether the signer signed the serving certificate.
    pub signed_by_signer: bool,
    /// Whether the serving certificate names every name the webhook is
    /// reached by (a changed `--webhook-url` does not).
    pub names_match: bool,
}

/// What to do about the Secret now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// It is not capwasm's (brought by the user, or by cert-manager): served
    /// as it is and read again when it changes, never written.
    Foreign,
    /// Nothing to do before `until`.
    Keep {
        /// When to look again.
        until: i64,
    },
    /// Make a CA and add it to the bundle, the CAs still valid kept; the
    /// serving certificate stays until the bundle reaches the API server.
    NewCa,
    /// A new CA is in the bundle but may not have reached the API server:
    /// look again once it has.
    AwaitTrust,
    /// Sign a new serving certificate with the signer; `prune` drops every
    /// other CA from the bundle (no replica serves a certificate one of them
    /// signed any more).
    Renew {
        /// Whether the other CAs are dropped.
        prune: bool,
    },
}

/// What to do about a Secret holding `facts` at `now`; `trusted` says
/// whether the bundle it holds has reached the API server.
pub fn plan(facts: &Facts, now: i64, trusted: bool) -> Plan {
    let Some(signer) = facts.signer.filter(|ca| !ca.due(now)) else {
        return if facts.ours {
            Plan::NewCa
        } else {
            Plan::Foreign
        };
    };
    let serving = facts.serving;
    match (facts.ours, facts.signed_by_signer, trusted) {
        (false, _, _) => Plan::Foreign,
        // The signer is new: its certificate may be served once trusted,
        // or at once when the one served has expired anyway.
        (true, false, false) if !serving.expired(now) => Plan::AwaitTrust,
        (true, false, _) => Plan::Renew { prune: false },
        (true, true, _) if serving.due(now) || !facts.names_match => Plan::Renew { prune: true },
        (true, true, _) => Plan::Keep {
            until: serving.renew_at().min(signer.renew_at()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YEAR: i64 = 365 * 24 * 3600;

    /// A fresh Secret of capwasm's at 0: a ten-year CA and a one-year
    /// serving certificate it signed.
    fn fresh() -> Facts {
        Facts {
            ours: true,
            signer: Some(Period {
                not_before: 0,
                not_after: 10 * YEAR,
            }),
            serving: Period {
                not_before: 0,
                not_after: YEAR,
            },
            signed_by_signer: true,
            names_match: true,
        }
    }

    #[test]
    fn a_period_is_due_once_less_than_a_third_of_it_remains() {
        let year = Period {
            not_before: 0,
            not_after: 3 * 100,
        };
        assert_eq!(year.renew_at(), 200);
        assert!(!year.due(199));
        assert!(year.due(200));
        // A period the wrong way round is due at its end.
        let odd = Period {
            not_before: 10,
            not_after: 5,
        };
        assert_eq!(odd.renew_at(), 5);
    }

    type Case = (&'static str, Facts, i64, bool, Plan);

    fn check(cases: &[Case]) {
        for (name, facts, now, trusted, expected) in cases {
            assert_eq!(plan(facts, *now, *trusted), *expected, "{name}");
        }
    }

    #[test]
    fn plan_renews_the_serving_certificate_when_due_or_misnamed() {
        check(&[
            (
                "fresh_keeps_until_two_thirds_of_the_serving_certificate",
                fresh(),
                1,
                false,
                Plan::Keep {
                    until: YEAR - YEAR / 3,
                },
            ),
            (
                "serving_renewed_once_two_thirds_are_gone",
                fresh(),
                YEAR - YEAR / 3,
                false,
                Plan::Renew { prune: true },
            ),
            (
                "serving_renewed_when_it_lacks_a_name",
                Facts {
                    names_match: false,
                    ..fresh()
                },
                1,
                false,
                Plan::Renew { prune: true },
            ),
            (
                "foreign_is_never_written_even_expired",
                Facts {
                    ours: false,
                    signer: None,
                    ..fresh()
                },
                2 * YEAR,
                true,
                Plan::Foreign,
            ),
        ]);
    }

    #[test]
    fn plan_replaces_a_ca_near_expiry_and_serves_its_certificate_once_trusted() {
        let ca_due = 10 * YEAR - 10 * YEAR / 3;
        check(&[
            (
                "ca_near_expiry_is_replaced_first",
                Facts {
                    serving: Period {
                        not_before: ca_due - 10,
                        not_after: ca_due - 10 + YEAR,
                    },
                    ..fresh()
                },
                ca_due,
                true,
                Plan::NewCa,
            ),
            (
                "keep_wakes_for_the_ca_when_it_is_due_first",
                Facts {
                    serving: Period {
                        not_before: ca_due - 10,
                        not_after: ca_due - 10 + YEAR,
                    },
                    ..fresh()
                },
                ca_due - 1,
                false,
                Plan::Keep { until: ca_due },
            ),
            (
                "older_version_without_ca_key_gets_a_new_ca",
                Facts {
                    signer: None,
                    signed_by_signer: false,
                    ..fresh()
                },
                1,
                false,
                Plan::NewCa,
            ),
            (
                "new_ca_waits_until_the_api_server_trusts_it",
                Facts {
                    signed_by_signer: false,
                    ..fresh()
                },
                1,
                false,
                Plan::AwaitTrust,
            ),
            (
                "new_ca_signs_once_trusted_and_keeps_the_old_ca",
                Facts {
                    signed_by_signer: false,
                    ..fresh()
                },
                1,
                true,
                Plan::Renew { prune: false },
            ),
            (
                "new_ca_signs_at_once_when_the_served_certificate_expired",
                Facts {
                    signed_by_signer: false,
                    ..fresh()
                },
                YEAR,
                false,
                Plan::Renew { prune: false },
            ),
        ]);
    }
}
