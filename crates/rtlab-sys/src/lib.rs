//! rtlab-sys: Every Linux syscall and pseudo-file rtlab uses; the only crate with unsafe.
