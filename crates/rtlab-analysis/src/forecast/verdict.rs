//! Verdicts: whether one application class's configuration meets the miss rate its users
//! accept, on this forecast — yes, no, or the run cannot tell yet.
//!
//! Only the decision lives here; its sentence is `words.rs`'.

use super::outcome::Forecast;
use crate::classes::ApplicationClass;
use serde::Serialize;

/// A plain verdict for one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Suitable,
    NotSuitable,
    /// The run is too short to tell (and no tail projection reaches the slack).
    Undetermined,
}

/// Whether `class` can use the buffering of `forecast`: its MTTF against the class's acceptable
/// rate; [`VerdictKind::Undetermined`] when the data can't tell.
pub fn verdict_kind(class: &ApplicationClass, forecast: &Forecast) -> VerdictKind {
    match forecast.meets(class.acceptable) {
        Some(true) => VerdictKind::Suitable,
        Some(false) => VerdictKind::NotSuitable,
        None => VerdictKind::Undetermined,
    }
}
