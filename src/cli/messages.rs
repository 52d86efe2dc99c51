//! Output that never panics: a closed pipe (`leasectl ls | head`) or a dead terminal
//! must not turn into a crash after the work is done. A failed write is remembered:
//! the command then exits non-zero (see [`stdout_failure`]). Human text carries this
//! command line's registry options in its hints ([`super::hints`]).

use std::sync::Mutex;

/// A line to standard output (see the module's note).
macro_rules! say {
    () => {{
        use std::io::Write as _;
        $crate::cli::messages::note_stdout(writeln!(std::io::stdout()));
    }};
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = $crate::cli::hints::hinted(&format!($($t)*));
        $crate::cli::messages::note_stdout(writeln!(std::io::stdout(), "{text}"));
    }};
}
macro_rules! say_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = $crate::cli::hints::hinted(&format!($($t)*));
        $crate::cli::messages::note_stdout(write!(std::io::stdout(), "{text}"));
    }};
}
macro_rules! say_err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = $crate::cli::hints::hinted(&format!($($t)*));
        let _ = writeln!(std::io::stderr(), "{text}");
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

/// Flush standard output, and say whether anything written to it was lost.
pub(super) fn stdout_failure() -> Option<String> {
    use std::io::Write as _;
    note_stdout(std::io::stdout().flush());
    STDOUT_ERROR.lock().ok()?.as_ref().map(|e| e.to_string())
}
