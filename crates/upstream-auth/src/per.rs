//! Whose account a server's calls act as: one shared account for the
//! deployment, or each caller's own (`"per": "identity"` on an `oauth`
//! block). A block that does not say is per identity when this process's
//! frontend authenticates its clients (they have identities to connect
//! accounts for) and per deployment otherwise; the process says which at
//! start ([`set_clients_identified`]).

use std::sync::OnceLock;

use crate::spec::{AuthSpec, Per};

static CLIENTS_IDENTIFIED: OnceLock<bool> = OnceLock::new();

/// Say whether this process's frontend authenticates its clients (`serve
/// --http` with tokens or OAuth): the default of an `oauth` block without
/// `"per"`. Once; unset counts as `false` (the split `bridge` service,
/// which cannot know: its blocks say `"per"` when they mean identity).
pub fn set_clients_identified(identified: bool) -> bool {
    CLIENTS_IDENTIFIED.set(identified).is_ok()
}

/// True when `spec` makes each identity act upstream with its own grant.
pub fn is_per_identity(spec: &AuthSpec) -> bool {
    match spec {
        AuthSpec::OAuth(oauth) => match oauth.per {
            Some(Per::Identity) => true,
            Some(Per::Deployment) => false,
            None => CLIENTS_IDENTIFIED.get().copied().unwrap_or(false),
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::OAuthSpec;

    #[test]
    fn an_oauth_block_that_says_per_is_taken_at_its_word() {
        let with = |per| AuthSpec::OAuth(OAuthSpec { per, ..Default::default() });
        assert!(is_per_identity(&with(Some(Per::Identity))));
        assert!(!is_per_identity(&with(Some(Per::Deployment))));
    }
}
