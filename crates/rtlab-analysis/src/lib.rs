//! rtlab-analysis: Statistics, tail projection, forecasts and schedulability: pure functions of Run records.

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
pub mod supply;
pub mod tail;
pub mod timers;
