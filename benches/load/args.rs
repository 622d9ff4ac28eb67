//! Command-line flags of the load harness's helper processes (`--name value`).

/// The value after `name`, parsed; `None` when absent or unparsable.
pub fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}
