//! What can be wrong with a registry: the rules of strict validation (spec §3), and
//! one broken rule located in the file.

/// Which strict-validation rule an entry or file breaks (spec §3), in Hermes' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Rule {
    /// The operating system would not give the bytes (permissions, an I/O error): the
    /// file may be fine; the fix is its owner, mode or disk, not its content.
    CannotRead,
    Unreadable,
    NotJson,
    WrongShape,
    NonObjectEntry,
    LeaseId,
    DuplicateLeaseId,
    SessionId,
    Pid,
    Surface,
    TrackLiveness,
    Metadata,
    ProcessStartTime,
}

impl Rule {
    /// A stable machine name for `--json` output.
    pub fn code(self) -> &'static str {
        match self {
            Rule::CannotRead => "cannot_read",
            Rule::Unreadable => "unreadable",
            Rule::NotJson => "not_json",
            Rule::WrongShape => "wrong_shape",
            Rule::NonObjectEntry => "non_object_entry",
            Rule::LeaseId => "invalid_lease_id",
            Rule::DuplicateLeaseId => "duplicate_lease_id",
            Rule::SessionId => "invalid_session_id",
            Rule::Pid => "invalid_pid",
            Rule::Surface => "invalid_surface",
            Rule::TrackLiveness => "invalid_track_liveness",
            Rule::Metadata => "invalid_metadata",
            Rule::ProcessStartTime => "invalid_process_start_time",
        }
    }
}

impl Rule {
    /// How doctor heads a problem of this rule.
    pub fn heading(self) -> &'static str {
        if self == Rule::CannotRead { "UNREADABLE" } else { "INVALID" }
    }
}

/// One broken rule, located: which entry (0-based index) and its lease id if readable.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Problem {
    pub rule: Rule,
    pub entry_index: Option<usize>,
    pub lease_id: Option<String>,
    pub detail: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.entry_index, &self.lease_id) {
            (Some(i), Some(id)) => write!(f, "entry {i} (lease {id}): {}", self.detail),
            (Some(i), None) => write!(f, "entry {i}: {}", self.detail),
            _ => write!(f, "{}", self.detail),
        }
    }
}
