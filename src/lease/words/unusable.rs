//! A value leasectl was given or read that it cannot use, said so an operator can act.

/// A value leasectl was given or read that it cannot use (an option, a profile name,
/// a line of /proc/stat), with what is wrong in words an operator can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unusable(pub String);

impl From<Unusable> for String {
    fn from(u: Unusable) -> String {
        u.0
    }
}
