//! Helpers shared by integration tests.

pub mod counting;
