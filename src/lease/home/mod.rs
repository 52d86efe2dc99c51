//! The home's files: every path leasectl opens in a Hermes home goes through `safe_file`
//! (the one door); where registries are (`paths`), which directories are profiles
//! (`profiles`, Hermes 0.22's rules), the registry lock (`lock`), the cap
//! (`config`), state.db (`context`; its readings kept while unchanged in
//! `context_cache`), the audit file (`audit`) and who removed a lease by it (`remover`),
//! the recorder's journal (`journal`) and the history merged from them (`history`).

pub mod audit;
pub mod config;
pub mod context;
pub(crate) mod context_cache;
pub(crate) mod context_map;
pub(crate) mod history;
pub(crate) mod journal;
pub mod lock;
pub mod paths;
pub mod profiles;
pub mod remover;
pub(crate) mod safe_file;
