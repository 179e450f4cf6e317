//! `agent-exec trace export --format otlp-json`: spans from a real trace,
//! checked here and parsed with the official OpenTelemetry protobuf
//! definitions (`opentelemetry-proto`, through `tests/otlp/parse_otlp.py`).

#[path = "../crates/sandbox/tests/common/kernel.rs"]
mod kernel;

use std::path::{Path, PathBuf};
use std::process::Command;

use kernel::require_kernel_feature;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agent-exec");
const ARG_SECRET: &str = "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2";
const ENV_SECRET: &str = "env-Secret-Value-7c1d9e2f";

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(dir.path(), Some(65_534), Some(65_534)).unwrap();
    }
    dir
}

fn run(root: &Path, trace: &Path, shell: &str, session: &str) -> Value {
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/code.toml");
    let out = Command::new(BIN)
        .arg("--policy")
        .arg(policy)
        .arg("--root")
        .arg(root)
        .arg("--record")
        .arg(trace)
        .args(["--session", session, "--shell", shell])
        .env("DEPLOY_API_TOKEN", ENV_SECRET)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A trace of three calls: one that runs (with secrets in its arguments
/// and environment), one the policy denies, one that fails.
/// Returns the trace and the rule that denied the second call.
fn recorded_trace(dir: &Path) -> (PathBuf, String) {
    let root = project();
    let trace = dir.join("t.jsonl");
    let ok = run(
        root.path(),
        &trace,
        &format!("echo {ARG_SECRET} {ENV_SECRET}"),
        "s1",
    );
    assert_eq!(ok["ok"], true, "{ok}");
    let denied = run(root.path(), &trace, "curl https://example.com", "s1");
    assert_eq!(denied["policy_decision"], "deny", "{denied}");
    let failed = run(root.path(), &trace, "cat missing-file.txt", "s1");
    assert_eq!(failed["ok"], false, "{failed}");
    (trace, denied["matched_rule"].as_str().unwrap().to_string())
}

fn export(trace: &Path, out: &Path) -> Value {
    let status = Command::new(BIN)
        .args(["trace", "export", "--format", "otlp-json", "--out"])
        .arg(out)
        .arg(trace)
        .status()
        .unwrap();
    assert!(status.success());
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

fn attrs(span: &Value) -> serde_json::Map<String, Value> {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["key"].as_str().unwrap().to_string(), a["value"].clone()))
        .collect()
}

#[test]
fn one_genai_span_per_call_with_decision_sandbox_and_result() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, rule) = recorded_trace(dir.path());
    let out = dir.path().join("spans.json");
    let doc = export(&trace, &out);
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    assert_eq!(spans.len(), 3);
    for span in spans {
        let a = attrs(span);
        assert_eq!(a["gen_ai.operation.name"]["stringValue"], "execute_tool");
        assert_eq!(a["gen_ai.tool.name"]["stringValue"], "run_shell");
        assert_eq!(a["gen_ai.conversation.id"]["stringValue"], "s1");
        assert!(a.contains_key("gen_ai.tool.call.id"));
        assert_eq!(span["name"], "execute_tool run_shell");
        assert_eq!(span["traceId"].as_str().unwrap().len(), 32);
        assert_eq!(span["spanId"].as_str().unwrap().len(), 16);
    }
    let (ran, denied, failed) = (attrs(&spans[0]), attrs(&spans[1]), attrs(&spans[2]));
    assert_eq!(ran["agent_exec.decision"]["stringValue"], "allow");
    assert_eq!(ran["process.exit.code"]["intValue"], "0");
    assert_eq!(ran["agent_exec.sandbox.seccomp"]["boolValue"], true);
    assert!(ran.contains_key("agent_exec.sandbox.limits"));
    assert!(!ran.contains_key("error.type"));
    assert_eq!(spans[0]["status"]["code"], 0);

    assert_eq!(denied["agent_exec.decision"]["stringValue"], "deny");
    assert_eq!(denied["agent_exec.rule"]["stringValue"], rule.as_str());
    assert_eq!(denied["error.type"]["stringValue"], "PERMISSION_DENIED");
    assert_eq!(spans[1]["status"]["code"], 2);

    assert_eq!(failed["agent_exec.decision"]["stringValue"], "allow");
    assert!(failed.contains_key("error.type"), "{failed:?}");

    // Exporting twice gives the same ids: a collector can deduplicate.
    let again = export(&trace, &dir.path().join("again.json"));
    assert_eq!(
        again["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"],
        spans[0]["spanId"]
    );
    // What the trace redacted stays redacted.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains(ARG_SECRET) && !text.contains(ENV_SECRET));
}

/// The interpreter with `opentelemetry-proto`: the CI venv's, else python3.
fn proto_python() -> Option<String> {
    let candidates = std::env::var("AGENT_EXEC_CI_PYTHON")
        .into_iter()
        .chain(["python3".to_string()]);
    for py in candidates {
        let ok = Command::new(&py)
            .args([
                "-c",
                "import opentelemetry.proto.collector.trace.v1.trace_service_pb2",
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    None
}

#[test]
fn the_export_parses_with_the_official_protobuf_definitions() {
    let py = proto_python();
    if !require_kernel_feature(
        "python3 with opentelemetry-proto (pip install opentelemetry-proto; .ci/run sets AGENT_EXEC_CI_PYTHON)",
        py.is_some(),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = recorded_trace(dir.path());
    let out = dir.path().join("spans.json");
    let doc = export(&trace, &out);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/parse_otlp.py");
    let parsed = Command::new(py.unwrap())
        .arg(script)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        parsed.status.success(),
        "protobuf parse failed: {}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let p: Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(p["resource"]["service.name"], "agent-exec");
    let spans = p["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 3);
    let ours = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    for (proto, json) in spans.iter().zip(ours) {
        assert_eq!(proto["trace_id_len"], 16);
        assert_eq!(proto["span_id_len"], 8);
        assert_eq!(proto["trace_id"], json["traceId"]);
        assert_eq!(proto["kind"], 1, "SPAN_KIND_INTERNAL");
        assert!(proto["end"].as_u64().unwrap() >= proto["start"].as_u64().unwrap());
        assert_eq!(proto["attributes"]["gen_ai.operation.name"], "execute_tool");
    }
    assert_eq!(spans[1]["attributes"]["agent_exec.decision"], "deny");
    assert_eq!(spans[1]["status_code"], 2, "STATUS_CODE_ERROR");
    let limits = spans[0]["attributes"]["agent_exec.sandbox.limits"]
        .as_array()
        .unwrap();
    assert!(!limits.is_empty());
}
