//! rtlab-analysis: Statistics, tail projection, forecasts and schedulability: pure functions of Run records.
