//! Giving freed memory back to the system after a large piece of work: the console's first
//! read of 100,000 registries, the watcher arming 100,000 directories. Both leave pages
//! free but held by the allocator (glibc keeps them for reuse), a third of the console's
//! resident memory for as long as it runs.

/// Return the allocator's free pages to the system (glibc's `malloc_trim`); elsewhere,
/// nothing to do.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // the call below has no safe wrapper; see SAFETY
pub(crate) fn give_back_free_pages() {
    // SAFETY: malloc_trim takes no pointer and may be called at any time from any thread;
    // it only releases memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn give_back_free_pages() {}
