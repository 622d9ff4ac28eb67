//! junction-server
