//! Where one call's session state lives ([`StateKey`]), found when a check
//! first needs it.

use crate::Bridge;

/// Where one call's session state lives, resolved once, when a check first
/// needs it (see [`scope`]): the session itself, or a stateless scope's
/// current generation. When the call moves a scope on, the old
/// generation's state is forgotten then.
pub(crate) struct StateKey<'a> {
    bridge: &'a Bridge,
    session: &'a str,
    resolved: Option<String>,
}

impl<'a> StateKey<'a> {
    pub(crate) fn new(bridge: &'a Bridge, session: &'a str) -> Self {
        Self { bridge, session, resolved: None }
    }

    pub(crate) async fn get(&mut self) -> Result<&str, code_mode_core::state::StateError> {
        if self.resolved.is_none() {
            let resolved = self.bridge.inner.scopes.resolve(self.session).await?;
            if let Some(expired) = &resolved.expired
                && let Err(e) = self.bridge.forget_state(expired).await
            {
                // Harmless: no call uses that generation again.
                tracing::warn!(scope = %self.session, error = %e, "could not forget an ended scope generation");
            }
            self.resolved = Some(resolved.key);
        }
        Ok(self.resolved.as_deref().unwrap_or(self.session))
    }
}
