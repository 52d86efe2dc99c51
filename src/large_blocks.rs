//! The binary's allocator: the system's, but a block of 2 MiB or more starts on a 2 MiB
//! boundary and is marked for transparent huge pages. Reading a registry of 10,000
//! entries (2.1 MB) then faults in one huge page instead of 513 small ones (each fault a
//! trip into the kernel); where the kernel has no huge page ready it gives small pages,
//! as before. The kernel's `transparent_hugepage` setting decides: `never` turns it off.
//!
//! Only a command that ends once done asks for them ([`use_huge_pages`]): a process that
//! keeps reading (the console) kept ranges marked after their blocks were freed, where
//! its later small allocations would get whole huge pages too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// A huge page on x86-64 (and the size from which a block is placed on one).
const HUGE_PAGE: usize = 2 << 20;

/// Whether new large blocks are marked for huge pages (they are placed on huge-page
/// boundaries either way, so that freeing one never depends on when it was made).
static HUGE_PAGES: AtomicBool = AtomicBool::new(false);

/// Mark the large blocks made from now on for huge pages.
pub fn use_huge_pages() {
    HUGE_PAGES.store(true, Ordering::Relaxed);
}

/// Let every thread allocate from the main thread's arena. glibc gives a thread an arena
/// of its own, and what a short-lived thread (the state.db reader) frees there the main
/// thread never reuses: at 50,000 leases `doctor` peaked 1.5-2 MB higher. For a process
/// that ends once done; one with threads at work all along keeps theirs.
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes a glibc malloc setting and touches no memory of ours; a
    // refused setting (it returns 0) leaves malloc as it was.
    #[allow(unsafe_code)] // mallopt has no safe wrapper; see SAFETY
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// [`System`], with large blocks on huge pages.
pub struct LargeBlocksOnHugePages;

impl LargeBlocksOnHugePages {
    /// The layout a block of `layout` is made with: a large one aligned to a huge page.
    /// Decided by the size alone, so that freeing (which is given the same size) finds it.
    fn placed(layout: Layout) -> Layout {
        if layout.size() < HUGE_PAGE {
            return layout;
        }
        Layout::from_size_align(layout.size(), layout.align().max(HUGE_PAGE)).unwrap_or(layout)
    }

    /// A block for `layout`, made by `make` with the layout it is placed by, and marked
    /// when large.
    fn made(layout: Layout, make: impl FnOnce(Layout) -> *mut u8) -> *mut u8 {
        let placed = Self::placed(layout);
        let block = make(placed);
        if placed != layout {
            Self::advise(block, layout);
        }
        block
    }

    /// Ask for huge pages under the whole huge pages a new large block spans.
    #[allow(unsafe_code)] // madvise has no safe wrapper here; see SAFETY
    fn advise(block: *mut u8, layout: Layout) {
        let whole = layout.size() / HUGE_PAGE * HUGE_PAGE;
        let aligned = (block as usize).is_multiple_of(HUGE_PAGE);
        if block.is_null() || whole == 0 || !aligned || !HUGE_PAGES.load(Ordering::Relaxed) {
            return;
        }
        // SAFETY: the range lies inside the block just made, which nothing else uses yet;
        // MADV_HUGEPAGE changes how its pages are backed, never their contents. A failure
        // (a kernel without it) leaves small pages, as without the call.
        unsafe {
            libc::madvise(block.cast(), whole, libc::MADV_HUGEPAGE);
        }
    }
}

// SAFETY: every block comes from System with the layout `placed` gives, and goes back to it
// with the same one (a block's size is given again when it is freed or resized).
#[allow(unsafe_code)] // a global allocator is an unsafe trait; see SAFETY
unsafe impl GlobalAlloc for LargeBlocksOnHugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: `placed` is a valid layout of the same non-zero size as `layout`.
        Self::made(layout, |placed| unsafe { System.alloc(placed) })
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        Self::made(layout, |placed| unsafe { System.alloc_zeroed(placed) })
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: the block was made by `alloc` with `placed(layout)` (same size given back).
        unsafe { System.dealloc(block, Self::placed(layout)) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.size() < HUGE_PAGE && new_size < HUGE_PAGE {
            // SAFETY: small before and after: System's own block, resized by System.
            return unsafe { System.realloc(block, layout, new_size) };
        }
        // Large before or after: made anew where it belongs, the contents copied over.
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a new block of a valid layout; the two never overlap, and the old one is
        // freed with the layout it was made with.
        unsafe {
            let new_block = self.alloc(new_layout);
            if !new_block.is_null() {
                std::ptr::copy_nonoverlapping(block, new_block, layout.size().min(new_size));
                self.dealloc(block, layout);
            }
            new_block
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mapping flags (`VmFlags` in /proc/self/smaps) of the mapping holding `at`.
    fn flags_of_mapping_holding(at: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
            if let Some((start, end)) = range.filter(|_| !line.starts_with("VmFlags"))
                && let (Ok(start), Ok(end)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16))
            {
                inside = (start..end).contains(&at);
            }
            if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.trim().to_owned();
            }
        }
        panic!("no mapping holds {at:#x}")
    }

    /// A large block starts on a huge page and is marked for huge pages (`hg`); a small
    /// one is the system's own; resizing across the bound, either way, keeps the contents.
    #[test]
    #[allow(unsafe_code)] // the allocator's own calls; see SAFETY
    fn a_large_block_is_on_huge_pages_and_keeps_its_contents_when_resized() {
        let a = LargeBlocksOnHugePages;
        let large = Layout::from_size_align(3 << 20, 1).expect("layout");
        // A kernel built without transparent huge pages has no such mark to give.
        let marks = std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists();
        let marked = |block: *mut u8| flags_of_mapping_holding(block as usize).split(' ').any(|f| f == "hg");
        // SAFETY: each block is used within the size it was made with, and freed once with
        // the layout it has then.
        unsafe {
            // Before `use_huge_pages` (no other test here calls it): placed, not marked.
            let unmarked = a.alloc(large);
            assert_eq!(unmarked as usize % HUGE_PAGE, 0, "placed on a huge page either way");
            assert!(!marked(unmarked), "not marked before use_huge_pages");
            a.dealloc(unmarked, large);
            use_huge_pages();
            let block = a.alloc(large);
            assert!(!block.is_null());
            assert_eq!(block as usize % HUGE_PAGE, 0, "starts on a huge page");
            if marks {
                assert!(marked(block), "marked for huge pages: {}", flags_of_mapping_holding(block as usize));
            }
            for i in 0..large.size() {
                *block.add(i) = (i % 251) as u8;
            }
            let small = a.realloc(block, large, 4096);
            assert!((0..4096).all(|i| *small.add(i) == (i % 251) as u8), "shrunk: contents kept");
            let small_layout = Layout::from_size_align(4096, 1).expect("layout");
            let grown = a.realloc(small, small_layout, 5 << 20);
            assert_eq!(grown as usize % HUGE_PAGE, 0, "grown large: on a huge page");
            assert!((0..4096).all(|i| *grown.add(i) == (i % 251) as u8), "grown: contents kept");
            a.dealloc(grown, Layout::from_size_align(5 << 20, 1).expect("layout"));
        }
    }
}
