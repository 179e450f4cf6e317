//! The MCP requests this server answers: `initialize`, `tools/list` and
//! `tools/call` for `run_shell`; `notifications/cancelled` stops a call.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::Value;

use super::{Inflight, McpError, PeerSlot};
use crate::request::{RequestLimits, parse_run_shell_arguments};
use crate::result::ToolResult;
use crate::sandbox::CancelToken;
use crate::service::{Service, next_call_id, tool_schema};

/// The newest protocol revision served: the last one with an `initialize`
/// handshake and server-to-client requests, which elicitation needs.
pub(crate) const PROTOCOL_REVISION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// The ToolResult JSON Schema, as the docs publish it.
const TOOL_RESULT_SCHEMA: &str = include_str!("../../docs/tool-result.schema.json");

/// How often a long call reports that it is still running, when the
/// client asked for progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

pub(crate) struct McpServer {
    service: Arc<Service>,
    tool: Tool,
    limits: RequestLimits,
    /// The session label every call of this MCP session carries.
    session: String,
    peer: Arc<PeerSlot>,
    inflight: Arc<Inflight>,
}

impl McpServer {
    pub(crate) fn new(
        service: Arc<Service>,
        peer: Arc<PeerSlot>,
        inflight: Arc<Inflight>,
    ) -> McpServer {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        McpServer {
            tool: run_shell_tool(&service),
            limits: RequestLimits::from_policy(&service.policy().limits),
            session: format!("mcp-{}-{started}", std::process::id()),
            service,
            peer,
            inflight,
        }
    }
}

/// Serves one session on stdin/stdout until the client closes it or a
/// SIGTERM/SIGINT arrives.
pub(crate) async fn serve_stdio(server: McpServer) -> Result<(), McpError> {
    use tokio::signal::unix::{SignalKind, signal};
    let io = |what| move |source| McpError::Io { what, source };
    let mut term = signal(SignalKind::terminate()).map_err(io("installing SIGTERM"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io("installing SIGINT"))?;
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(r) => r,
        Err(e) => {
            // A client that leaves before or during the handshake ends
            // the session like one that leaves later.
            tracing::info!(error = %e, "no MCP session: the client went away");
            return Ok(());
        }
    };
    let stop = running.cancellation_token();
    tokio::select! {
        quit = running.waiting() => {
            tracing::info!(reason = ?quit, "MCP session ended");
        }
        _ = term.recv() => { tracing::info!("SIGTERM received"); stop.cancel(); }
        _ = int.recv() => { tracing::info!("SIGINT received"); stop.cancel(); }
    }
    Ok(())
}

/// `run_shell` as `tools/list` shows it: the socket's strict input schema,
/// the ToolResult schema as output, and what this policy and root allow.
fn run_shell_tool(service: &Service) -> Tool {
    let schema = tool_schema();
    let mut input = match schema.get("parameters") {
        Some(Value::Object(m)) => m.clone(),
        _ => JsonObject::new(),
    };
    // The socket carries these two in its envelope; MCP has none, so they
    // sit beside the arguments (and stay out of the arguments' hash).
    if let Some(Value::Object(props)) = input.get_mut("properties") {
        props.insert(
            "idempotency_key".into(),
            serde_json::json!({"type": "string", "minLength": 8, "maxLength": 128,
                "description": "A key you choose per logical call and reuse on retry: a retried call returns the first result instead of running again."}),
        );
        props.insert(
            "approval_id".into(),
            serde_json::json!({"type": "string", "minLength": 8, "maxLength": 128,
                "description": "The approval_id an APPROVAL_PENDING result gave, once a human approved it: the same request then runs once."}),
        );
    }
    let mut output: JsonObject = serde_json::from_str(TOOL_RESULT_SCHEMA).unwrap_or_default();
    // Clients compile the schema with their own JSON Schema dialect and
    // cache it by id; the keywords below are what both need.
    output.remove("$id");
    output.remove("$schema");
    let policy = service.policy();
    let read_only = policy.sandbox.read_only;
    let annotations = ToolAnnotations::with_title("Run a shell command (sandboxed)")
        .read_only(read_only)
        .destructive(!read_only)
        .idempotent(false)
        // No network: at most loopback ports the policy names.
        .open_world(false);
    Tool::new(
        Cow::Borrowed("run_shell"),
        Cow::Owned(describe_tool(service)),
        Arc::new(input),
    )
    .with_raw_output_schema(Arc::new(output))
    .with_annotations(annotations)
}

/// One paragraph a model can act on: what the policy allows, where, and
/// within which limits.
fn describe_tool(service: &Service) -> String {
    let p = service.policy();
    let l = &p.limits;
    let allows = if p.description.trim().is_empty() {
        format!("Policy {:?}.", p.name)
    } else {
        format!("Policy {:?}: {}", p.name, p.description.trim())
    };
    let network = if p.sandbox.connect_ports.is_empty() {
        "no network".to_string()
    } else {
        format!(
            "network only to loopback ports {:?}",
            p.sandbox.connect_ports
        )
    };
    format!(
        "Run one shell command (bash syntax) in the project root {root} under a kernel sandbox, \
         and get a structured result: ok, exit_code, stdout, stderr, and for a refusal \
         error_type, message and suggestion. {allows} Commands outside the policy are refused \
         with the rule and a reason; change the command rather than retrying it unchanged. \
         Limits: {t} ms by default, timeout_ms up to {max} ms; {chars} characters kept per \
         output stream; stdin up to {stdin} bytes; {network}; files outside the root are not \
         reachable{ro}.",
        root = service.root().display(),
        t = l.timeout_ms,
        max = l.max_timeout_ms,
        chars = l.output_chars,
        stdin = l.max_stdin_bytes,
        ro = if p.sandbox.read_only {
            "; the root is read-only"
        } else {
            ""
        },
    )
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.protocol_version = PROTOCOL_REVISION;
        info.server_info = Implementation::new("agent-exec", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "run_shell runs shell commands in the project under a policy and a sandbox; \
             a refused call says why and what to do instead."
                .into(),
        );
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL_REVISION))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.peer.set(&context.peer);
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == self.tool.name).then(|| self.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.peer.set(&context.peer);
        if request.name != self.tool.name {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}: this server offers run_shell",
                    request.name
                ),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let mut req = match parse_run_shell_arguments(&args, &self.limits) {
            Ok(r) => r,
            Err(e) => return Ok(to_mcp(&e.to_result(next_call_id())).into()),
        };
        req.session = Some(self.session.clone());
        let token = CancelToken::new();
        let _cancel_on_drop = CancelOnDrop(token.clone());
        let guard = self.inflight.enter(token.clone());
        let progress = context
            .meta
            .get_progress_token()
            .map(|t| tokio::spawn(report_progress(context.peer.clone(), t)));
        let service = self.service.clone();
        let call_token = token.clone();
        // The guard goes with the blocking call: the session's end waits
        // for the command, not for this future.
        let mut job = tokio::task::spawn_blocking(move || {
            let r = service.call(req, &call_token);
            drop(guard);
            r
        });
        let joined = loop {
            tokio::select! {
                j = &mut job => break j,
                _ = context.ct.cancelled(), if !token.is_cancelled() => {
                    tracing::info!("notifications/cancelled: killing the call");
                    token.cancel();
                }
            }
        };
        if let Some(p) = progress {
            p.abort();
        }
        let result = joined.unwrap_or_else(|e| {
            tracing::error!(error = %e, "the call panicked");
            ToolResult::refusal(
                next_call_id(),
                crate::result::ErrorType::InternalError,
                "the call failed internally",
            )
        });
        Ok(to_mcp(&result).into())
    }
}

struct CancelOnDrop(CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// `notifications/progress` while the call runs: seconds elapsed, no total.
async fn report_progress(peer: Peer<RoleServer>, token: ProgressToken) {
    let started = Instant::now();
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    loop {
        tick.tick().await;
        let secs = started.elapsed().as_secs_f64();
        let mut p = ProgressNotificationParam::new(token.clone(), secs.floor());
        p.message = Some(format!("running for {} s", secs as u64));
        if peer.notify_progress(p).await.is_err() {
            return;
        }
    }
}

/// The ToolResult as structured content, with a short text rendering for
/// clients (and models) that read only text.
pub(crate) fn to_mcp(r: &ToolResult) -> CallToolResult {
    let mut out = CallToolResult::success(vec![ContentBlock::text(render_text(r))]);
    out.structured_content = Some(serde_json::to_value(r).unwrap_or(Value::Null));
    out.is_error = Some(!r.ok);
    out
}

/// A summary line, then the command's output as it came.
pub(crate) fn render_text(r: &ToolResult) -> String {
    let mut s = match (r.error_type, r.exit_code, r.signal) {
        (None, Some(code), _) => format!("exit {code} ({} ms)", r.duration_ms),
        (Some(e), _, _) => {
            let name = serde_json::to_value(e)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let mut line = format!("{name}: {}", r.message);
            if let Some(rule) = &r.matched_rule {
                line.push_str(&format!(" [rule {rule}]"));
            }
            if let Some(sugg) = &r.suggestion {
                line.push_str(&format!("\nsuggestion: {sugg}"));
            }
            line
        }
        (None, None, Some(sig)) => format!("killed by signal {sig} ({} ms)", r.duration_ms),
        (None, None, None) => r.message.clone(),
    };
    for (name, text, truncated) in [
        ("stdout", &r.stdout, r.stdout_truncated),
        ("stderr", &r.stderr, r.stderr_truncated),
    ] {
        if !text.is_empty() {
            s.push_str(&format!(
                "\n--- {name}{} ---\n{text}",
                if truncated { " (truncated)" } else { "" }
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::ErrorType;

    #[test]
    fn a_refusal_is_an_error_with_its_reason_in_the_text() {
        let mut r = ToolResult::refusal("c1", ErrorType::PermissionDenied, "denied: rm");
        r.matched_rule = Some("no-rm".into());
        r.suggestion = Some("use git rm".into());
        let m = to_mcp(&r);
        assert_eq!(m.is_error, Some(true));
        let text = render_text(&r);
        assert_eq!(
            text,
            "PERMISSION_DENIED: denied: rm [rule no-rm]\nsuggestion: use git rm"
        );
        let structured = m.structured_content.unwrap();
        assert_eq!(structured["error_type"], "PERMISSION_DENIED");
        assert_eq!(structured["call_id"], "c1");
    }

    #[test]
    fn the_output_schema_is_the_published_one_without_its_id() {
        let v: JsonObject = serde_json::from_str(TOOL_RESULT_SCHEMA).unwrap();
        assert_eq!(v["type"], "object");
        assert!(v.contains_key("$id"));
        assert!(v["required"].as_array().unwrap().len() > 10);
    }
}
