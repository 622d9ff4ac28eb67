//! junction-catalog
