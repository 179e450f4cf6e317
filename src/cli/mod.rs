//! Subcommands of the binary that are not part of the library's surface:
//! host diagnosis and trace export. Kept apart from `main.rs` so each stays
//! small and new subcommands can be added without touching the others.

pub mod doctor;
pub mod examples;
pub mod forward;
pub mod parse;
pub mod trace_cmd;
