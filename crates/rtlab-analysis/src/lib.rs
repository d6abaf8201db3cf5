//! rtlab-analysis: statistics, tail projection, forecasts and schedulability, as pure functions
//! of Run records and plain numbers: no I/O, no clock, no platform code, so every answer a command
//! gives from a record can be tested from fixtures alone.

pub mod application;
pub mod check_study;
pub mod chi_squared;
pub mod classes;
pub mod compare;
pub mod forecast;
pub mod forecast_periodic;
pub mod forecast_study;
pub mod interference;
pub mod offenders;
pub mod projection;
pub mod run_verdict;
pub mod schedulability;
pub mod student_t;
pub mod supply;
pub mod tail;
pub mod timers;
pub mod trace_forecast;
