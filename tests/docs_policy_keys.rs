//! docs/policy.md's "Every key and its default" lists every key of every
//! settings table, and the default it gives is the one the loader uses.

use std::collections::BTreeMap;

use agent_exec::policy::{
    BudgetPolicy, DaemonPolicy, EnvPolicy, Limits, RequirePolicy, SandboxPolicy, ShellPolicy,
    TracePolicy,
};
use serde_json::Value;

/// What a documented default cell says.
#[derive(Debug)]
enum Documented {
    Value(Value),
    /// `*built in*`: a long value described in words; only the key is checked.
    BuiltIn,
}

fn documented() -> BTreeMap<String, Documented> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/policy.md")).unwrap();
    let start = text
        .find("## Every key and its default")
        .expect("section missing");
    let section = &text[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
    let section = &section[..end];
    let mut table = String::new();
    let mut out = BTreeMap::new();
    for line in section.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            // "`[limits]`" -> "limits"; a heading naming several tables
            // uses dotted keys in its rows instead.
            table = match h.matches('[').count() {
                1 => h
                    .trim_matches(|c| c == '`' || c == '[' || c == ']')
                    .to_string(),
                _ => String::new(),
            };
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let key = cells[1].trim_matches('`');
        let full = if table.is_empty() {
            key.to_string()
        } else {
            format!("{table}.{key}")
        };
        let cell = cells[2];
        let value = match cell {
            "(none)" => Documented::Value(Value::Null),
            "*built in*" => Documented::BuiltIn,
            lit => {
                let lit = lit.trim_matches('`');
                let parsed: toml::Table = toml::from_str(&format!("v = {lit}"))
                    .unwrap_or_else(|e| panic!("{full}: default {lit:?} is not TOML: {e}"));
                Documented::Value(serde_json::to_value(&parsed["v"]).unwrap())
            }
        };
        assert!(out.insert(full.clone(), value).is_none(), "{full} twice");
    }
    out
}

fn flatten(prefix: &str, v: Value, out: &mut BTreeMap<String, Value>) {
    for (k, v) in v.as_object().unwrap().clone() {
        out.insert(format!("{prefix}.{k}"), v);
    }
}

fn actual() -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let j = |v| serde_json::to_value(v).unwrap();
    flatten("limits", j(Limits::default()), &mut out);
    flatten(
        "env",
        serde_json::to_value(EnvPolicy::default()).unwrap(),
        &mut out,
    );
    let mut sandbox = serde_json::to_value(SandboxPolicy::default()).unwrap();
    sandbox.as_object_mut().unwrap().remove("require");
    flatten("sandbox", sandbox, &mut out);
    flatten(
        "sandbox.require",
        serde_json::to_value(RequirePolicy::default()).unwrap(),
        &mut out,
    );
    flatten(
        "shell",
        serde_json::to_value(ShellPolicy::default()).unwrap(),
        &mut out,
    );
    flatten(
        "budget",
        serde_json::to_value(BudgetPolicy::default()).unwrap(),
        &mut out,
    );
    flatten(
        "daemon",
        serde_json::to_value(DaemonPolicy::default()).unwrap(),
        &mut out,
    );
    flatten(
        "trace",
        serde_json::to_value(TracePolicy::default()).unwrap(),
        &mut out,
    );
    out
}

#[test]
fn every_settings_key_is_documented_with_its_real_default() {
    let docs = documented();
    let real = actual();
    let mut problems = Vec::new();
    for (key, value) in &real {
        match docs.get(key) {
            None => problems.push(format!("{key}: not in docs/policy.md (default {value})")),
            Some(Documented::BuiltIn) => {}
            Some(Documented::Value(d)) if d == value => {}
            Some(Documented::Value(d)) => {
                problems.push(format!("{key}: documented default {d}, real {value}"))
            }
        }
    }
    for key in docs.keys() {
        if !real.contains_key(key) {
            problems.push(format!("{key}: documented but the loader has no such key"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn documented_defaults_load_as_a_policy() {
    // Writing every documented default out explicitly gives the same
    // settings as leaving them all out.
    let mut text = String::from("name = \"d\"\ndefault = \"deny\"\n");
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, v) in documented() {
        let Documented::Value(v) = v else { continue };
        if v.is_null() {
            continue;
        }
        let (table, k) = key.rsplit_once('.').unwrap();
        let lit = toml::Value::try_from(v).unwrap().to_string();
        tables
            .entry(table.to_string())
            .or_default()
            .push(format!("{k} = {lit}"));
    }
    for (table, lines) in tables {
        text.push_str(&format!("[{table}]\n{}\n", lines.join("\n")));
    }
    let explicit = agent_exec::Policy::parse(&text, "explicit").unwrap();
    let implicit =
        agent_exec::Policy::parse("name = \"d\"\ndefault = \"deny\"\n", "implicit").unwrap();
    assert_eq!(explicit.limits, implicit.limits);
    assert_eq!(explicit.sandbox, implicit.sandbox);
    assert_eq!(explicit.budget, implicit.budget);
    assert_eq!(explicit.trace, implicit.trace);
    assert_eq!(explicit.env.keep, implicit.env.keep);
}
