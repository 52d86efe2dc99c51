//! Giving freed memory back to the system after a large piece of work: the console's first
//! read of 100,000 registries, the watcher arming 100,000 directories. Both leave pages
//! free but held by the allocator (glibc keeps them for reuse), a third of the console's
//! resident memory for as long as it runs. And a console keeps glibc's thresholds fixed,
//! so that what a thread frees at the top of its heap is given back as it goes.

/// Return the allocator's free pages to the system (glibc's `malloc_trim`); elsewhere,
/// nothing to do.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // the call below has no safe wrapper; see SAFETY
pub fn give_back_free_pages() {
    // SAFETY: malloc_trim takes no pointer and may be called at any time from any thread;
    // it only releases memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn give_back_free_pages() {}

/// For a long-lived process: free memory at the top of a heap is given back as it is
/// freed, at glibc's default thresholds, from now on. glibc otherwise raises both after
/// the first large block is freed (up to 32 MB for mapping, 64 MB for trimming), and a
/// thread's heap is not trimmed by `malloc_trim` at all: the watcher's arming over
/// 100,000 profiles left 10–27 MB free but resident for as long as the console ran.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // the calls below have no safe wrapper; see SAFETY
pub fn give_back_as_freed() {
    const GLIBC_DEFAULT: libc::c_int = 128 * 1024;
    // SAFETY: mallopt takes no pointer; setting a threshold only changes when the
    // allocator maps or trims, and fixes it (no dynamic adjustment) from then on.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, GLIBC_DEFAULT);
        libc::mallopt(libc::M_MMAP_THRESHOLD, GLIBC_DEFAULT);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn give_back_as_freed() {}
