//! How an operator names what to act on: where leases live (a registry file, etcd, a
//! host over SSH), the hosts they name, a lease by its id or a prefix of it, and the
//! ids themselves.

pub mod etcd_access;
pub mod host_spec;
pub mod ids;
pub(crate) mod location;
pub(crate) mod lookup;
pub(crate) mod target;
