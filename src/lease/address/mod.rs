//! How an operator names what to act on: where leases live (a registry file, etcd, a
//! host over SSH), the hosts they name, a lease by its id or a prefix of it, and the
//! ids themselves.

pub mod host_spec;
pub mod ids;
pub mod location;
pub mod lookup;
pub mod target;
