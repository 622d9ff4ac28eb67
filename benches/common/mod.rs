//! What every Criterion bench here shares.

use std::time::Duration;

use criterion::Criterion;

/// Short runs: the machines are shared, and the harness wants all figures
/// from one sitting (override with `--measurement-time`).
pub fn short_runs(sample_size: usize) -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(sample_size)
}
