//! Tests of the load-test binary: it runs, and what it reports holds
//! together (the numbers themselves are measured with a release build, see
//! `loadtests/README.md`). One test binary for the crate.

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

mod clients;
mod smoke;
