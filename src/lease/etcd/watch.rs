//! The change feed of an etcd prefix: etcd's watch API, re-made when it breaks.

use std::time::Duration;

use super::EtcdConfig;
use crate::lease::backend::MAX_GATHER;
use crate::lease::location::EtcdLocation;

/// Watch the etcd prefix with etcd's watch API; every burst of changes (gathered like
/// file events) becomes one change report. A broken watch is re-made after a second,
/// with a change report each time so the worker's reload shows the outage and the
/// recovery (and catches anything missed while no watch was open).
/// `report` returns false when nobody listens any more: the watcher then stops.
pub fn spawn(at: EtcdLocation, debounce: Duration, report: impl Fn() -> bool + Send + 'static) {
    let config = EtcdConfig::at(&at, super::DEFAULT_TTL);
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            report();
            return;
        };
        let Ok(endpoints) = rt.block_on(super::endpoints::Endpoints::connect(&config)) else {
            report();
            return;
        };
        while rt.block_on(watch_once(&config, &endpoints, &report, debounce)) {
            std::thread::sleep(Duration::from_secs(1));
            if !report() {
                return;
            }
        }
    });
}

/// One watch stream, until it breaks (true: try again) or the console is gone (false).
async fn watch_once(
    config: &EtcdConfig,
    endpoints: &super::endpoints::Endpoints,
    report: &impl Fn() -> bool,
    debounce: Duration,
) -> bool {
    use etcd_client::WatchOptions;
    // On whichever endpoint answers: a node that is down is passed over.
    let setup = endpoints.run(super::endpoints::Resend::Safe, config.timeout, |mut c| {
        let prefix = config.prefix.clone();
        async move { c.watch(prefix, Some(WatchOptions::new().with_prefix())).await }
    });
    let mut stream = match setup.await {
        Ok(s) => s,
        Err(_) => return true,
    };
    // The watch is open: anything before it is caught by one reload now.
    if !report() {
        return false;
    }
    loop {
        match stream.message().await {
            Ok(Some(resp)) if resp.canceled() => return true,
            Ok(Some(resp)) if resp.events().is_empty() => continue,
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return true,
        }
        // Gather until quiet for `debounce`, never longer than MAX_GATHER.
        let started = tokio::time::Instant::now();
        loop {
            let left = MAX_GATHER.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            match tokio::time::timeout(debounce.min(left), stream.message()).await {
                Ok(Ok(Some(_))) => {}
                Ok(_) => {
                    report();
                    return true;
                }
                Err(_) => break,
            }
        }
        if !report() {
            return false;
        }
    }
}
