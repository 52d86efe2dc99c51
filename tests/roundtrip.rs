//! Round trips: whatever valid registry we read, we write back with every field
//! kept, in exactly the bytes Python's `json.dumps(sort_keys=True, ensure_ascii=False)`
//! would write (checked against the real python3 for a few hundred random registries).

use std::process::{Command, Stdio};

use leasectl::lease::{pyjson, store};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Any JSON value, a few levels deep, with unicode, control characters, big ints and floats.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Value::Number(Number::from_f64(f).unwrap_or_else(|| Number::from(0)))),
        "\\PC{0,12}".prop_map(Value::String),
        "[\\x00-\\x1f\"\\\\é😀\u{2028}a-z]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A valid entry with random extra fields.
fn entry(i: usize) -> impl Strategy<Value = Value> {
    (
        "[0-9a-f]{32}",
        "\\PC{1,10}".prop_filter("non-blank", |s| !s.trim().is_empty()),
        1u64..4_000_000,
        prop::option::of("[a-z]{1,8}"),
        prop::option::of(1.0e9f64..2.0e9),
        prop::collection::btree_map("x_[a-z]{1,6}", json_value(), 0..3),
    )
        .prop_map(move |(id, session, pid, surface, start, extra)| {
            let mut m: Map<String, Value> = extra.into_iter().collect();
            m.insert("lease_id".into(), Value::String(format!("{id}{i}")));
            m.insert("session_id".into(), Value::String(session));
            m.insert("pid".into(), Value::from(pid));
            m.insert("surface".into(), surface.map(Value::String).unwrap_or(Value::Null));
            m.insert(
                "process_start_time".into(),
                start.and_then(Number::from_f64).map(Value::Number).unwrap_or(Value::Null),
            );
            Value::Object(m)
        })
}

fn registry() -> impl Strategy<Value = Value> {
    (0usize..6)
        .prop_flat_map(|n| (0..n).map(entry).collect::<Vec<_>>())
        .prop_map(|entries| serde_json::json!({ "entries": entries }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// write(read(x)) keeps every field, and a second round trip changes no byte.
    #[test]
    fn read_then_write_keeps_every_field(reg in registry()) {
        let text = pyjson::to_string(&reg);
        let file = store::parse(text.as_bytes()).map_err(|p| TestCaseError::fail(format!("{p:?}")))?;
        let written = store::serialize(&file);
        let back: Value = serde_json::from_str(&written).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(json_eq(&back, &reg), true, "fields changed:\n{}\n{}", written, text);
        let again = store::serialize(&store::parse(written.as_bytes()).map_err(|p| TestCaseError::fail(format!("{p:?}")))?);
        prop_assert_eq!(again, written);
    }

    /// Any bytes at all: parsing never panics, and a success round-trips.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(file) = store::parse(&bytes) {
            let written = store::serialize(&file);
            prop_assert!(store::parse(written.as_bytes()).is_ok());
        }
        let _ = leasectl::lease::repair::plan(&bytes, &mut leasectl::lease::Prober::new());
    }
}

/// Equality that treats numbers by value (1.50 == 1.5), as a reader would.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            _ if x.to_string() == y.to_string() => true,
            (Some(p), Some(q)) => p == q,
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Our bytes equal python3's `json.dumps(json.loads(x), sort_keys=True, ensure_ascii=False)`
/// for 300 random registries (one python process checks them all).
#[test]
fn bytes_equal_pythons_json_dumps() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = registry();
    let mut ours = Vec::new();
    let mut inputs = Vec::new();
    for _ in 0..300 {
        let reg = strategy.new_tree(&mut runner).expect("generate").current();
        // Feed python non-canonical input (serde_json's own compact form), so both sides re-serialize.
        let input = serde_json::to_string(&reg).expect("to_string");
        let file = store::parse(input.as_bytes()).expect("valid by construction");
        ours.push(store::serialize(&file));
        inputs.push(input);
    }
    let script = "import json,sys\nfor line in sys.stdin:\n    sys.stdout.write(json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False) + '\\n')\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    // Feed stdin from a thread: python writes while we write, and a full pipe must not deadlock.
    let mut stdin = child.stdin.take().expect("stdin");
    let feed = inputs.clone();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        for i in &feed {
            // One registry per line: serde_json never emits raw newlines inside JSON text.
            writeln!(stdin, "{i}").expect("write to python");
        }
    });
    let out = child.wait_with_output().expect("python output");
    writer.join().expect("writer");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8 from python");
    let theirs: Vec<&str> = text.split('\n').filter(|l| !l.is_empty()).collect();
    assert_eq!(theirs.len(), ours.len());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "registry {i} differs from python's bytes; input {}", inputs[i]);
    }
}
