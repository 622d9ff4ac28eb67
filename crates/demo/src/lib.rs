//! junction-demo
