//! Homes on other hosts. leasectl runs `leasectl serve --stdio` there over the
//! operator's own `ssh` (one session a host, however many registries and actions) and
//! speaks JSON lines with it (`wire`); the store for such a registry (`store`) answers
//! the same interface as a local one, acting through the remote's own leasectl, with the
//! same guards and the remote's audit record.

pub(crate) mod install;
pub(crate) mod link;
pub(crate) mod options;
pub(crate) mod store;
pub(crate) mod wire;
