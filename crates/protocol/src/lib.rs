//! junction-protocol
