//! Owner processes: who is alive (`liveness`, with start times as psutil reads them in
//! `proc_stat`), pidfds to signal them (`pidfds`), and what they are (`owner`).

pub mod liveness;
pub mod owner;
pub mod pidfds;
pub mod proc_stat;
