//! `rtlab monitor`'s words: the line it prints on stderr when it starts serving.

use rtlab_core::Nanos;

/// `rtlab monitor: measuring rt-high on CPUs [0, 1] every 10ms, windows of 10s; metrics on
/// http://127.0.0.1:9464/metrics`: the classes by name, the CPUs, the period, the window and the
/// address the metrics are served on.
pub fn start_line(
    classes: &[&str],
    cpus: &[usize],
    period: Nanos,
    window: Nanos,
    address: &str,
) -> String {
    format!(
        "rtlab monitor: measuring {} on CPUs {:?} every {}, windows of {}; metrics on http://{}/metrics",
        classes.join(","),
        cpus,
        period,
        window,
        address
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_start_line_names_what_is_measured() {
        assert_eq!(
            super::start_line(
                &["rt-high", "normal"],
                &[0, 1],
                rtlab_core::Nanos::from_millis(10),
                rtlab_core::Nanos::from_secs(10),
                "127.0.0.1:9464"
            ),
            "rtlab monitor: measuring rt-high,normal on CPUs [0, 1] every 10ms, windows of 10s; \
             metrics on http://127.0.0.1:9464/metrics"
        );
    }
}
