//! What `doctor` finds in a registry and what its repair plans and did, shared by every
//! backend and the audit record.

pub(crate) mod repair;
pub(crate) mod report;
