//! Integration tests of the frontend's own code against real data: the
//! `run_python` description of the real tools of four reference servers
//! (the catalog the bridge builds of them, committed as
//! `testing/search-eval/catalog-300.json`, which the bridge's tests keep
//! true), and the web console over real HTTP with a fake bridge. One test
//! binary for the crate.

// A panic in a test is the test failing.
#![allow(clippy::unwrap_used)]

mod accounts;
mod console;
mod description;
