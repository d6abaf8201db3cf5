//! The measuring threads on Windows (`cfg(windows)`): `rtlab run`'s periodic threads per class
//! (`run`), the timer study's cells (`timers`) and paper 004's measure/change pair (`change`).
//!
//! The same rules as the Linux probe: every buffer is allocated before measuring, the sample path
//! reads QueryPerformanceCounter, records and waits, and every thread stops on its own at its end
//! time (each wait is bounded). Recording reuses [`crate::recorder`] and the missed-period
//! arithmetic [`crate::schedule`], which are platform-free.

pub mod change;
pub mod run;
pub mod timers;
