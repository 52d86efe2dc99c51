//! The safe move for the owner of a lease an operator named, as the CLI says it: the
//! owner's kind, what state.db says, and how many sessions its process holds.

use crate::lease::owners::kind::{Holdings, OwnerMove};
use crate::lease::{self, LeaseStore, LeaseView, Location, Target};

/// The first live owner `target` names in `store`, and what to do about it, worded with
/// its commands as hints; None when it names no live owner.
pub(super) fn advice_for(store: &mut dyn LeaseStore, target: &Target) -> Option<(OwnerMove, String)> {
    let views = store.read().leases.ok()?;
    let v = views.iter().find(|v| target.names(&v.entry) && lease::view::owner_may_be_alive(v))?;
    let m = owner_move(store.location(), &views, v);
    let said = lease::words::safe_move::advise_move(&m, v.entry.lease_id(), v.pid_here(), &lease::words::hint::command);
    Some((m, said))
}

/// The owner of `v` (a lease of `views`, read at `location`) as advice needs it.
pub(super) fn owner_move(location: &Location, views: &[LeaseView], v: &LeaseView) -> OwnerMove {
    let contexts = location.registry().map(|r| lease::home::context::read(&r.home, &[v.entry.session_id()]));
    let ctx = contexts.as_ref().and_then(|c| c.get(v.entry.session_id()));
    let cmdline = lease::owners::owner::command_line(v.pid_here());
    OwnerMove::of(v, ctx, Holdings::of(views).of_owner(v), cmdline.as_deref(), lease::now())
}
