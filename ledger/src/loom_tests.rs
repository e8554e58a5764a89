//! Loom models (filled below).
