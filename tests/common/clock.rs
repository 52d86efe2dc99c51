//! A wall-clock step during a long test: `btime` moves with it, every live owner's start
//! time then reads whole seconds off, and the protocol judges those owners recycled (an
//! acquire prunes them). That is the rule working, not the fault a test looks for.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use leasectl::lease::owners::liveness::boot_time_from_proc_stat;

/// Run `test`; when it fails and `btime` moved while it ran (the wall clock was stepped),
/// say so and run it once more, which must pass. A failure with the clock still is the
/// test's own.
pub fn again_if_the_clock_stepped(name: &str, test: impl Fn()) {
    let before = boot_time_from_proc_stat().ok();
    let Err(failure) = catch_unwind(AssertUnwindSafe(&test)) else { return };
    let after = boot_time_from_proc_stat().ok();
    if before.is_none() || before == after {
        resume_unwind(failure);
    }
    eprintln!(
        "{name}: the wall clock was stepped while it ran (btime {before:?} -> {after:?}), which makes live \
         owners look recycled; running it once more"
    );
    test();
}
