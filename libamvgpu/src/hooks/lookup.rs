//! Doors that hand out function pointers.
