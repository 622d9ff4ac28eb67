//! junction-upstream
