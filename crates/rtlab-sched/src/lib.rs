//! rtlab-sched: CPU Reservations and Time Constraints: the planner, admission control.
