//! The registry's entry format: an entry and its rules (`entry`), an entry read by
//! Hermes' layout (`layout`), what is wrong with one (`problem`), and Python-identical
//! JSON (`pyjson`).

pub(crate) mod entry;
pub(crate) mod layout;
pub(crate) mod problem;
pub mod pyjson;
