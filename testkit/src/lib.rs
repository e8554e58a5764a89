//! Placeholder: filled by its issue. Nothing here yet.
