//! Why a sandbox cannot be set up.

use std::path::PathBuf;

use nix::errno::Errno;

use crate::config::Layer;

/// Why the sandbox cannot be set up. Each variant belongs to a layer
/// ([`SandboxError::layer`]), so the operator knows what the host lacks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A path a Landlock rule names could not be opened.
    #[error("landlock unavailable: opening {path}: {source}")]
    LandlockPath {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The kernel refuses the filter, or the filter cannot be built.
    #[error("seccomp unavailable: {0}")]
    Seccomp(String),
    /// A layer the configuration requires (`Requirement::Required`) is
    /// missing on this host or for this run.
    #[error("required sandbox layer {} unavailable: {reason}", layer.name())]
    Required { layer: Layer, reason: String },
    /// The child would run as uid 0 without Landlock's signal scope: it
    /// could then signal every root process, the supervisor included.
    #[error(
        "a child running as uid 0 needs Landlock's signal scope ({reason}): without it the child may signal every root process, the supervisor included; set sandbox.run_as to another user"
    )]
    RootChildUnscoped { reason: String },
    /// The project root belongs to root, its runs would be uid 0 (to write
    /// it), and the kernel cannot confine a uid-0 child (no signal scope).
    #[error(
        "the project root {} belongs to root, and its runs would need uid 0 (without capabilities) to write it, which needs Landlock's signal scope ({reason}); give the project to the user who works in it (`chown -R USER: {}`), run agent-exec as that user, or set sandbox.root_owned_child = \"nobody\" (runs then cannot write the project)",
        root.display(),
        root.display()
    )]
    RootOwnedProject { root: PathBuf, reason: String },
    /// The child would run as a user it must not run as.
    #[error("privilege drop impossible: {0}")]
    User(String),
    /// The user to run as could not be looked up.
    #[error("privilege drop impossible: run_as {who:?}: {source}")]
    UserLookup {
        who: String,
        #[source]
        source: Errno,
    },
    /// The per-run directory (or their base) could not be made.
    #[error("per-run directory: {}: {source}", path.display())]
    RunDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The base of the per-run directories is not one only the supervisor
    /// controls.
    #[error(
        "per-run directory: {} is not a directory owned by uid {uid}; remove it",
        path.display()
    )]
    RunDirBase { path: PathBuf, uid: u32 },
    /// No place for the base of the per-run directories is safe: the last
    /// one tried, the temp directory, may be changed by other users.
    #[error(
        "per-run directory: {} (or a directory above it) may be changed by users other than uid {uid} and root; set XDG_RUNTIME_DIR, HOME or TMPDIR to a directory of that user's own",
        path.display()
    )]
    RunDirUntrusted { path: PathBuf, uid: u32 },
    /// A per-run directory could not be given to the child user.
    #[error("per-run directory: {}: chown: {source}", path.display())]
    RunDirChown {
        path: PathBuf,
        #[source]
        source: Errno,
    },
    /// A per-run directory could not be opened for its Landlock rule.
    #[error("per-run directory: {}: {source}", path.display())]
    RunDirOpen {
        path: PathBuf,
        #[source]
        source: Errno,
    },
    /// The root to confine the child to is unusable.
    #[error("sandbox setup: root {}: {source}", path.display())]
    Root {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The root disappeared while the sandbox was prepared.
    #[error("sandbox setup: root {} vanished", .0.display())]
    RootVanished(PathBuf),
    /// Per-run namespaces are required and this supervisor cannot create
    /// them.
    #[error("namespaces unavailable: {reason}")]
    Namespaces {
        reason: String,
        #[source]
        source: Option<std::io::Error>,
    },
    /// A file the setup reads could not be read.
    #[error("sandbox setup: {}: {source}", path.display())]
    Metadata {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SandboxError {
    /// The layer's short name (`landlock`, `seccomp`, `privileges`,
    /// `run_dir`, `namespaces`, `setup`, or a required [`Layer`]'s name).
    pub fn layer(&self) -> &'static str {
        match self {
            SandboxError::LandlockPath { .. } => "landlock",
            SandboxError::Seccomp(_) => "seccomp",
            SandboxError::Required { layer, .. } => layer.name(),
            SandboxError::RootChildUnscoped { .. } | SandboxError::RootOwnedProject { .. } => {
                Layer::LandlockScopes.name()
            }
            SandboxError::User(_) | SandboxError::UserLookup { .. } => "privileges",
            SandboxError::RunDir { .. }
            | SandboxError::RunDirBase { .. }
            | SandboxError::RunDirUntrusted { .. }
            | SandboxError::RunDirChown { .. }
            | SandboxError::RunDirOpen { .. } => "run_dir",
            SandboxError::Namespaces { .. } => "namespaces",
            SandboxError::Root { .. }
            | SandboxError::RootVanished(_)
            | SandboxError::Metadata { .. } => "setup",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages are what a tool result shows: the same words as when
    /// they were plain strings, with the cause kept as the source.
    #[test]
    fn messages_and_sources() {
        let e = SandboxError::LandlockPath {
            path: "/opt/x".into(),
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        };
        assert_eq!(e.layer(), "landlock");
        assert!(
            e.to_string()
                .starts_with("landlock unavailable: opening /opt/x: Permission denied"),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());

        let e = SandboxError::UserLookup {
            who: "ghost".into(),
            source: Errno::ENOENT,
        };
        assert_eq!(e.layer(), "privileges");
        assert_eq!(
            e.to_string(),
            format!(
                "privilege drop impossible: run_as \"ghost\": {}",
                Errno::ENOENT
            )
        );

        let e = SandboxError::RunDirBase {
            path: "/tmp/agent-exec-0".into(),
            uid: 0,
        };
        assert_eq!(e.layer(), "run_dir");
        assert_eq!(
            e.to_string(),
            "per-run directory: /tmp/agent-exec-0 is not a directory owned by uid 0; remove it"
        );
        assert!(std::error::Error::source(&e).is_none());

        let e = SandboxError::Required {
            layer: Layer::CgroupMemory,
            reason: "no memory controller".into(),
        };
        assert_eq!(e.layer(), "cgroup_memory");
        assert_eq!(
            e.to_string(),
            "required sandbox layer cgroup_memory unavailable: no memory controller"
        );
        let e = SandboxError::RootChildUnscoped {
            reason: "the kernel offers Landlock ABI 5".into(),
        };
        assert_eq!(e.layer(), "landlock_scopes");
        assert!(e.to_string().contains("uid 0"), "{e}");
        let e = SandboxError::Namespaces {
            reason: "the supervisor is not root".into(),
            source: None,
        };
        assert_eq!(e.layer(), "namespaces");
        assert_eq!(
            e.to_string(),
            "namespaces unavailable: the supervisor is not root"
        );

        let e = SandboxError::RootVanished("/srv/p".into());
        assert_eq!(e.layer(), "setup");
        assert_eq!(e.to_string(), "sandbox setup: root /srv/p vanished");
    }
}
