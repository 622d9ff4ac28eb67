//! junction-policy
