//! Words for people, the same in the CLI and the console: why a request was refused,
//! the commands a message says to paste (quoted for the shell), durations and names from
//! files made safe for a terminal, and what is wrong with a value given.

pub mod hint;
pub(crate) mod human;
pub mod refusal;
pub mod unusable;
