//! rtlab-probe: Measuring threads, hand-off chains, stress loads and competitor threads.
