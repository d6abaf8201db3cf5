//! A series' `tail`: the projection of its worst case per hour, day and week of use
//! (computed by `rtlab_analysis::tail`), or why there is none.

use serde::{Deserialize, Serialize};

/// `series[].tail`. Either a projection, or only `insufficient` when none could be made (e.g. an
/// unreadable histogram).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tail {
    /// Why there is no projection at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insufficient: Option<String>,
    /// What the per-window numbers mean.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub definition: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TailUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<Windows<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_hour: Option<WindowEstimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_day: Option<WindowEstimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_week: Option<WindowEstimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<TailFit>,
    /// Plain-language lines about rare latencies (`a latency ≥ 5 ms was seen …`).
    #[serde(default)]
    pub rare: Vec<String>,
}

impl Tail {
    /// A tail that says only why there is none.
    pub fn insufficient(reason: impl Into<String>) -> Tail {
        Tail {
            insufficient: Some(reason.into()),
            ..Tail::default()
        }
    }

    /// The estimate of one window (`per_hour`, `per_day`, `per_week`).
    pub fn window(&self, name: &str) -> Option<&WindowEstimate> {
        match name {
            "per_hour" => self.per_hour.as_ref(),
            "per_day" => self.per_day.as_ref(),
            "per_week" => self.per_week.as_ref(),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TailUsage {
    pub hours_per_day: f64,
    pub days_per_week: f64,
}

/// One value per window of use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Windows<T> {
    pub per_hour: T,
    pub per_day: T,
    pub per_week: T,
}

/// A window's median worst case with its interval, or why there is none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WindowEstimate {
    Value(EstimateValue),
    Insufficient { insufficient: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EstimateValue {
    pub estimate_ns: u64,
    pub ci_low_ns: u64,
    pub ci_high_ns: u64,
    pub confidence: f64,
    /// `gpd` or `empirical`.
    pub method: String,
}

/// The peaks-over-threshold fit, or why there is none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TailFit {
    Fitted(FitSummary),
    Insufficient { insufficient: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitSummary {
    pub threshold_ns: u64,
    pub exceedances: u64,
    pub samples: u64,
    pub sigma_ns: f64,
    pub xi: f64,
    pub ad_statistic: f64,
    pub ad_p_value: f64,
    pub thresholds_tested: u64,
    /// Whether the record's `peaks` hold every exceedance (with its time), so the fit can be
    /// redone from the record alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exceedances_kept_in_peaks: Option<bool>,
}
