//! rtlab-analysis: Statistics, tail projection, forecasts and schedulability: pure functions of Run records.

pub mod classes;
pub mod forecast;
pub mod projection;
pub mod schedulability;
pub mod supply;
pub mod tail;
