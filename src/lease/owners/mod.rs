//! Owner processes: who is alive (`liveness`, with start times as psutil reads them in
//! `proc_stat`), pidfds to signal them (`pidfds`), what they are (`owner`), and where a
//! listing's owners run (`owners_at`).

pub mod liveness;
pub mod owner;
pub mod owners_at;
pub mod pidfds;
pub mod proc_stat;
