//! The registry's entry format: an entry and its rules (`entry`), what is wrong with one
//! (`problem`), and Python-identical JSON (`pyjson`).

pub mod entry;
pub mod problem;
pub mod pyjson;
