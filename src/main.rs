//! The binary's entry is C's `main`, not std's start. std's start reads /proc/self/maps
//! to place the main thread's stack guard (glibc's pthread_getattr_np: 109,000 of the
//! 150,000 instructions of `--version` past the loader), for a message on a stack
//! overflow; a one-shot command pays that on every run. What else std's start does, and
//! leasectl relies on, is done here: descriptors 0 to 2 kept open, SIGPIPE ignored.
//! Every exit, a panic's too, goes through `std::process::exit`, which flushes standard
//! output.
// Under `cargo test` the harness brings its own `main`, and this binary has no tests.
#![cfg_attr(not(test), no_main)]

// A registry of 10,000 entries is read and written in blocks of 2 MB: on huge pages, each
// is one page fault instead of 513 (the README's Speed has the figures). `cli::run` asks
// for them for the commands that end once done.
#[global_allocator]
static ALLOCATOR: leasectl::large_blocks::LargeBlocksOnHugePages = leasectl::large_blocks::LargeBlocksOnHugePages;

#[cfg(not(test))]
#[allow(unsafe_code)] // the entry C's start calls must keep its name
#[unsafe(no_mangle)]
extern "C" fn main(_argc: std::ffi::c_int, _argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    start_as_std_does();
    // color-eyre gives readable reports for the unexpected; expected errors are printed by the CLI.
    let _ = color_eyre::install();
    // A panic ends the process as under std's start: reported by the hook, then exit code
    // 101 through `exit`, which flushes standard output (the console's restoring of the
    // terminal may still be there). Unwinding out of this C function would abort instead.
    let code = std::panic::catch_unwind(|| match leasectl::cli::parse() {
        Ok(cli) => leasectl::cli::run(cli),
        Err(code) => code,
    });
    std::process::exit(code.unwrap_or(101))
}

/// What std's start does that leasectl needs (std::env::args needs nothing: glibc hands
/// std the arguments before `main`).
#[cfg(not(test))]
#[allow(unsafe_code)] // the calls below have no safe wrapper; see SAFETY
fn start_as_std_does() {
    // SAFETY: fcntl(F_GETFD) only looks at a descriptor; open() makes a new one; signal()
    // sets a disposition. No memory is shared with Rust code, and no thread runs yet.
    unsafe {
        // A descriptor of 0 to 2 left closed by the parent would be the next file opened
        // (a registry), and what is printed would be written into it: /dev/null takes it.
        for fd in 0..=2 {
            if libc::fcntl(fd, libc::F_GETFD) == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)
                && libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) == -1
            {
                libc::abort();
            }
        }
        // A reader that went away (`| head`) is an error to handle, not a kill.
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}
