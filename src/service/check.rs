//! Stages 1 to 3, the ones that need no sandbox: validate → resolve cwd →
//! decide. A run goes on from here to the gate; `agent-exec check` stops
//! here and prints the decision.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::cwd::resolve_cwd;
use super::ids::next_call_id;
use super::refusal::Refusal;
use super::validate::validate;
use crate::policy::{Context, Decision, PathArgument, Policy, ProvenanceMode};
use crate::request::RunRequest;
use crate::result::ToolResult;

/// Decides requests without running them: the first stages of a
/// [`Service`](super::Service), usable where no sandbox is prepared.
/// Built by [`ServiceBuilder::build_checker`](super::ServiceBuilder::build_checker).
#[derive(Debug, Clone)]
pub struct Checker {
    policy: Arc<Policy>,
    root: PathBuf,
}

/// What the first stages establish about a request.
#[derive(Debug)]
pub(crate) struct Checked {
    pub(crate) cwd: PathBuf,
    pub(crate) decision: Decision,
    /// The request's path arguments, collected by the same walk when the
    /// policy's provenance mode is not `off`.
    pub(crate) paths: Vec<PathArgument>,
}

impl Checker {
    /// `root` must already be canonical (the builder makes it so).
    pub(crate) fn new(policy: Arc<Policy>, root: PathBuf) -> Checker {
        Checker { policy, root }
    }

    pub(crate) fn stages(&self, req: &RunRequest) -> Result<Checked, Refusal> {
        self.stages_under(&self.policy, req)
    }

    /// [`stages`](Self::stages) deciding under `policy` (the checker's
    /// own, amended).
    pub(crate) fn stages_under(
        &self,
        policy: &Policy,
        req: &RunRequest,
    ) -> Result<Checked, Refusal> {
        validate(req, &policy.limits)?;
        let cwd = resolve_cwd(&self.root, req.cwd.as_deref())?;
        let ctx = Context {
            root: &self.root,
            cwd: &cwd,
        };
        let decided = if self.policy.provenance.mode == ProvenanceMode::Off {
            policy.decide(&req.command, &ctx).map(|d| (d, Vec::new()))
        } else {
            policy.decide_with_paths(&req.command, &ctx)
        };
        let (decision, paths) = decided.map_err(|e| Refusal::Parse {
            at: e.position(),
            error: e.to_string(),
        })?;
        Ok(Checked {
            cwd,
            decision,
            paths,
        })
    }

    /// The policy's decision for `req`, after the same validation a run
    /// gets. A request refused before the policy could decide (a bad
    /// field, a cwd outside the root, a command that does not parse) comes
    /// back as the result a run would have answered.
    pub fn check(&self, req: &RunRequest) -> Result<Decision, Box<ToolResult>> {
        self.stages(req)
            .map(|c| c.decision)
            .map_err(|r| Box::new(r.into_result(&next_call_id(), None)))
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The canonical project root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
