//! Words for people, the same in the CLI and the console: why a request was refused,
//! the commands a message says to paste (quoted for the shell), durations and names from
//! files made safe for a terminal, what is wrong with a value given, and the safe move
//! for a lease by its owner's kind.

pub mod hint;
pub(crate) mod human;
pub mod refusal;
pub mod safe_move;
pub mod unusable;
