//! Integration tests of the shared core against a real nats-server: the
//! bus over both transports, the per-service NATS permissions, the
//! session-state store. One test binary for the crate.

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

mod bus;
mod files_in_shared;
mod permissions;
mod state;
