//! junction-config
