//! How the console orders lease groups: the sort modes, their keys' order and labels.

/// How lease groups are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortMode {
    Session,
    Lease,
    Surface,
    Pid,
    Owner,
    /// The owner process's start time.
    Started,
    /// The lease's age (oldest first).
    Age,
    LiveId,
    /// The host an owner runs on (etcd, --host): where there is a HOST column.
    Host,
    Liveness,
}

impl SortMode {
    /// `s` cycles through the usual few.
    pub fn next(self) -> SortMode {
        match self {
            SortMode::Session => SortMode::Age,
            SortMode::Age => SortMode::Pid,
            SortMode::Pid => SortMode::Surface,
            SortMode::Surface => SortMode::Liveness,
            _ => SortMode::Session,
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            SortMode::Session => "session",
            SortMode::Lease => "lease id",
            SortMode::Surface => "surface",
            SortMode::Pid => "pid",
            SortMode::Owner => "owner",
            SortMode::Started => "owner start (earliest first)",
            SortMode::Age => "age (oldest first)",
            SortMode::LiveId => "live id",
            SortMode::Host => "host",
            SortMode::Liveness => "liveness (not alive first)",
        }
    }
    /// The table column this sort follows (its place in the header), if any.
    pub fn column(self) -> Option<usize> {
        match self {
            SortMode::Session => None,
            SortMode::Lease => Some(0),
            SortMode::Surface => Some(1),
            SortMode::Pid => Some(2),
            SortMode::Owner => Some(3),
            SortMode::Started => Some(4),
            SortMode::Age => Some(5),
            SortMode::LiveId => Some(6),
            SortMode::Host => Some(7),
            SortMode::Liveness => Some(super::columns::BADGE),
        }
    }
}
