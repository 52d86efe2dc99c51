//! Output that never panics: a closed pipe (`leasectl ls | head`) or a dead terminal
//! must not turn into a crash after the work is done. A failed write is remembered:
//! the command then exits non-zero (see [`stdout_lost`]), unless its reader just closed.
//! The record is process-wide because standard output is.

use std::sync::Mutex;

/// A line to standard output (see the module's note), for a person: whatever it quotes
/// from a home is escaped on the way (`human::escape_layout`). Machine output (JSON,
/// metrics) is written exact, not through these.
macro_rules! say {
    () => {{
        use std::io::Write as _;
        $crate::cli::messages::note_stdout(writeln!(std::io::stdout()));
    }};
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($t)*);
        $crate::cli::messages::note_stdout(writeln!(std::io::stdout(), "{}", $crate::lease::words::human::escape_layout(&text)));
    }};
}
macro_rules! say_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($t)*);
        $crate::cli::messages::note_stdout(write!(std::io::stdout(), "{}", $crate::lease::words::human::escape_layout(&text)));
    }};
}
/// A line to standard error, for a person, escaped as [`say!`]'s.
macro_rules! say_err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($t)*);
        let _ = writeln!(std::io::stderr(), "{}", $crate::lease::words::human::escape_layout(&text));
    }};
}

/// The first error writing standard output, if any.
static STDOUT_ERROR: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// Remember a failed write to standard output (the first one).
pub fn note_stdout(result: std::io::Result<()>) {
    if let Err(e) = result
        && let Ok(mut first) = STDOUT_ERROR.lock()
    {
        first.get_or_insert(e);
    }
}

/// Flush standard output, and say whether anything written to it was lost (and why:
/// `BrokenPipe` is a reader that stopped reading, as `| head` does).
pub(super) fn stdout_failure() -> Option<(std::io::ErrorKind, String)> {
    use std::io::Write as _;
    note_stdout(std::io::stdout().flush());
    STDOUT_ERROR.lock().ok()?.as_ref().map(|e| (e.kind(), e.to_string()))
}

/// Output was lost for a reason other than its reader going away: a full disk, a dead
/// terminal. A reader that closed (`| head -1`) took what it wanted; that ends a
/// command quietly, as it ends `ls` and `kubectl`.
pub(super) fn stdout_lost() -> Option<String> {
    stdout_failure().filter(|(kind, _)| *kind != std::io::ErrorKind::BrokenPipe).map(|(_, e)| e)
}
