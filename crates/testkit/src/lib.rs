//! junction-testkit
