//! `capwasm:provider/bootstrap-tokens`: the bootstrap token the host made
//! for the call, if any, and whether the guest asked for it (a token no
//! call asked for is deleted by whoever made it).

use super::super::bindings::bootstrap_tokens::{BootstrapToken, Host};
use super::super::state::CallState;

impl Host for CallState {
    fn join_token(&mut self) -> Option<BootstrapToken> {
        self.join_token_asked = true;
        self.join_token.clone()
    }
}
