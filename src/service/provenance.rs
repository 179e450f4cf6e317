//! The pipeline's hooks for argument provenance (see
//! [`crate::provenance`]): tag a request's path arguments before the gate
//! (holding back, under `enforce`, a write on a guessed path), and after
//! the answer, put the tags in it and record what it showed.

use std::path::Path;

use super::Service;
use super::check::Checked;
use super::refusal::Refusal;
use crate::request::{RunRequest, SessionId};
use crate::result::{ArgProvenance, ToolResult};

impl Service {
    /// The tags of `req`'s path arguments (empty when provenance is off),
    /// or the refusal of a write the session never looked at.
    pub(super) fn provenance_tags(
        &self,
        call_id: &str,
        session: &SessionId,
        checked: &Checked,
    ) -> Result<Vec<ArgProvenance>, Box<ToolResult>> {
        let Some(p) = &self.provenance else {
            return Ok(Vec::new());
        };
        let (cwd, decision) = (&checked.cwd, &checked.decision);
        let tags = p.tag(session, self.checker.root(), &checked.paths);
        let Some(held) = p.hold_back(&tags, decision.read_only, cwd) else {
            return Ok(tags);
        };
        if let Some(t) = &self.trace {
            t.policy_decision(call_id, session, decision, false, None);
        }
        let mut r = Refusal::AssumedArgument {
            message: held.message,
            suggestion: held.suggestion,
            argument: held.argument,
        }
        .into_result(call_id, Some(decision));
        r.provenance = tags;
        Err(Box::new(r))
    }

    /// Puts the tags into the answer and records what it showed. A
    /// duplicate keeps the tags it was stored with and adds nothing.
    pub(super) fn provenance_finish(
        &self,
        session: &SessionId,
        req: &RunRequest,
        cwd: &Path,
        tags: Vec<ArgProvenance>,
        result: &mut ToolResult,
    ) {
        let Some(p) = &self.provenance else {
            return;
        };
        if result.duplicate {
            return;
        }
        result.provenance = tags;
        p.record(
            session,
            self.checker.root(),
            cwd,
            &req.command,
            &result.provenance,
            result,
        );
    }
}
