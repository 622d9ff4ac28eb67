//! junction-telemetry
