//! `agent-exec trace ...`: tools over recorded traces.

use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug)]
pub enum TraceCmd {
    /// Export a trace's calls as spans for an observability backend.
    #[command(after_help = EXPORT_EXAMPLES)]
    Export(ExportArgs),
}

const EXPORT_EXAMPLES: &str = "\
Examples:
  agent-exec trace export --format otlp-json session.jsonl > spans.json
  curl -H 'Content-Type: application/json' --data-binary @spans.json \\
       http://localhost:4318/v1/traces

One span per tool call (execute_tool run_shell), with the OpenTelemetry
GenAI attributes (gen_ai.operation.name, gen_ai.tool.name,
gen_ai.tool.call.id, gen_ai.conversation.id), the policy decision, the
sandbox layers and the result under agent_exec.*. Rotated segments of a
trace (NAME.1.jsonl, ...) are read too. Only what the trace holds is
exported: secrets redacted in the trace stay redacted.";

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// OTLP/JSON: an ExportTraceServiceRequest, as POSTed to /v1/traces.
    OtlpJson,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Output format.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Write here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Trace files (JSONL).
    #[arg(required = true, value_name = "TRACE")]
    pub traces: Vec<PathBuf>,
}

pub fn trace(cmd: TraceCmd) -> i32 {
    match cmd {
        TraceCmd::Export(a) => export(a),
    }
}

fn export(a: ExportArgs) -> i32 {
    let ExportFormat::OtlpJson = a.format;
    let (request, counts) = match agent_exec::trace::export_otlp_json(&a.traces) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agent-exec trace export: {e}");
            return 125;
        }
    };
    let mut text = match serde_json::to_string(&request) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("agent-exec trace export: {e}");
            return 125;
        }
    };
    text.push('\n');
    let written = match &a.out {
        Some(path) => std::fs::write(path, text.as_bytes()),
        None => std::io::stdout().lock().write_all(text.as_bytes()),
    };
    if let Err(e) = written {
        eprintln!("agent-exec trace export: {e}");
        return 125;
    }
    eprintln!(
        "agent-exec trace export: {} span(s){}{}",
        counts.spans,
        if counts.incomplete > 0 {
            format!(", {} without a result", counts.incomplete)
        } else {
            String::new()
        },
        if counts.damaged_lines > 0 {
            format!(", {} damaged line(s) skipped", counts.damaged_lines)
        } else {
            String::new()
        }
    );
    0
}
