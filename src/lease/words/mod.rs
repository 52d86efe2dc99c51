//! Words for people, the same in the CLI and the console: why a request was refused,
//! the commands a message says to paste (quoted for the shell), durations and names from
//! files made safe for a terminal.

pub mod hint;
pub(crate) mod human;
pub mod refusal;
