//! Writes the man pages (docs/man/) and shell completions (completions/)
//! from the CLI definition of `agent-exec`, whatever subcommands it has
//! when this is built. Run through `scripts/gen-docs.sh`.

#[allow(dead_code, unused_imports)]
#[path = "../../main.rs"]
mod app;
mod render;

use std::path::Path;

use clap::CommandFactory;

fn main() -> std::process::ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = render::render(app::Cli::command());
    // Pages of subcommands that no longer exist go too.
    for dir in ["docs/man", "completions"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            for e in entries.flatten() {
                let rel = Path::new(dir).join(e.file_name());
                if !files.iter().any(|(p, _)| *p == rel) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    for (rel, bytes) in &files {
        let path = root.join(rel);
        if let Some(parent) = path.parent()
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            eprintln!("gen-docs: {}: {e}", parent.display());
            return std::process::ExitCode::FAILURE;
        }
        if let Err(e) = std::fs::write(&path, bytes) {
            eprintln!("gen-docs: {}: {e}", path.display());
            return std::process::ExitCode::FAILURE;
        }
    }
    println!("gen-docs: wrote {} files", files.len());
    std::process::ExitCode::SUCCESS
}
