//! Integration tests of the sandbox-runner against the real Docker engine
//! and the real sandbox image: one test binary for the crate.
//!
//! Under `CI=true` a missing engine or image fails these tests; on a
//! developer's machine they report that they did not run.

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

mod exit_state;
mod image;
mod pool;
mod support;
