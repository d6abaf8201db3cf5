//! rtlab-trace: tracefs recording, trace parsing and cause attribution of late wake-ups.
