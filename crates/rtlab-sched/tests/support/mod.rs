//! Helpers shared by the enforcement test binaries.

pub mod spinner;
