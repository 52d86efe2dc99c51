//! Words for people: durations and text from files made safe for a terminal (`human`),
//! and the commands messages suggest, quoted for the shell they are pasted into (`hint`).

pub mod hint;
pub mod human;
