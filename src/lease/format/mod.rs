//! The registry's entry format: an entry and its rules (`entry`), an entry read by
//! Hermes' layout (`layout`), what is wrong with one (`problem`), and Python-identical
//! JSON (`pyjson`).

pub mod entry;
pub(crate) mod layout;
pub mod problem;
pub mod pyjson;
