//! FUSE adapter
