//! `ls` and `metrics` on etcd say what only etcd has: the owner's host, the TTL left, the
//! fencing token, and which prefix a series is about; an owner on this host is named by
//! its process, as on files.

use super::{run, shared_endpoint, start_holding, unique_prefix};

fn text(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn ls_on_etcd_names_host_owner_ttl_and_token_in_every_format() {
    let endpoint = shared_endpoint();
    let prefix = unique_prefix("listing");
    let (_holder, grant) = start_holding(&endpoint, &prefix, &["hold", "LS-S", "--json"]);
    let lease = grant["lease_id"].as_str().expect("lease id").to_owned();
    let token = grant["fencing_token"].as_i64().expect("token").to_string();
    let host = grant["host"].as_str().expect("host").to_owned();

    let table = text(&run(&endpoint, &prefix, &["ls"]));
    let row = table.lines().find(|l| l.contains("LS-S")).unwrap_or_default();
    assert!(table.contains("OWNER") && row.contains("leasectl"), "the holder's process is named:\n{table}");
    assert!(row.contains(&host) && row.contains(&token) && row.contains("ttl "), "{table}");
    assert!(!row.contains(&lease), "the table shows the short id:\n{table}");

    let wide = text(&run(&endpoint, &prefix, &["ls", "-o", "wide"]));
    assert_ne!(wide, table, "-o wide is not the table");
    assert!(wide.contains(&lease) && wide.contains("ETCD LEASE") && wide.contains("SLOT"), "{wide}");

    let tsv = text(&run(&endpoint, &prefix, &["ls", "-o", "tsv"]));
    let mut lines = tsv.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
    let fields: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
    assert_eq!(header.len(), fields.len(), "{tsv}");
    let field = |name: &str| header.iter().position(|h| *h == name).map(|i| fields[i]).unwrap_or("?");
    assert_eq!(field("HOST"), host);
    assert_eq!(field("FENCING_TOKEN"), token);
    assert!(field("TTL_SECS").parse::<u64>().is_ok_and(|t| t <= 10), "{tsv}");
    assert_eq!(field("OWNER"), "leasectl", "a live local pid is named: {tsv}");

    let metrics = text(&run(&endpoint, &prefix, &["metrics"]));
    let series = metrics.lines().find(|l| l.starts_with("leasectl_live_leases{")).unwrap_or_default();
    assert!(series.contains(&format!("prefix=\"{prefix}\"")), "two prefixes must not collide: {metrics}");
}
