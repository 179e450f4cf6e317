//! Combining: every check that fires during a walk offers a finding, and
//! the strictest one decides. A decision keeps only the winner (and builds
//! the strings of a finding only when it wins); an evaluation keeps every
//! finding, in the order the walk met them. Both choose the winner with
//! the same comparison, so they cannot disagree.

use serde::Serialize;

use crate::{Decision, InjectedFlag, RiskLevel, Verdict};

/// What produced a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FindingKind {
    /// A `[[rule]]` of the policy, matched by program or by raw pattern.
    Rule,
    /// No rule covered the program: the policy's `default`.
    Default,
    /// A check of the engine itself (`builtin:...`): paths, wrappers, shell
    /// builtins and shell features.
    Builtin,
}

/// The simple command a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CommandRef {
    /// Its place among the simple commands the walk visited, in order,
    /// nested ones included (0 for the first).
    pub index: usize,
    /// As written. For a nested shell's script (`bash -c '...'`), as
    /// written inside that script.
    pub text: String,
    /// 0 for the request's own commands, one more for each substitution
    /// or nested shell around it.
    pub depth: usize,
}

/// One rule match or engine check that fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Finding {
    /// What this part alone would get.
    pub verdict: Verdict,
    /// The rule's (or check's) risk.
    pub risk: RiskLevel,
    /// The rule id, `builtin:...` for engine checks, or `default`.
    pub rule: String,
    /// Written for a model to read.
    pub reason: String,
    /// The argument, path, operator or program concerned.
    pub token: Option<String>,
    /// A rule, the default, or an engine check.
    pub kind: FindingKind,
    /// `None` for findings about the request as a whole (raw `pattern`
    /// rules, constructs outside any command).
    pub command: Option<CommandRef>,
    /// A rule that matched but was passed over for a stricter or more
    /// specific rule of the same program. Listed to show it was seen; it
    /// never decides.
    pub superseded: bool,
}

impl Finding {
    /// Engine-level allows (`cd`, assignments, `command -v`) give way to a
    /// rule's allow of the same risk, as the rule says more.
    fn weak(&self) -> bool {
        is_weak(self.kind, self.verdict)
    }
}

fn is_weak(kind: FindingKind, verdict: Verdict) -> bool {
    kind == FindingKind::Builtin && verdict == Verdict::Allow
}

/// Whether a finding of this verdict and risk takes the decision from
/// `best`: stricter, or as strict and not weak where `best` is. On a tie
/// the earlier one stays.
fn takes_over(verdict: Verdict, risk: RiskLevel, weak: bool, best: Option<&Finding>) -> bool {
    let Some(b) = best else { return true };
    let (mine, theirs) = ((verdict, risk), (b.verdict, b.risk));
    mine > theirs || (mine == theirs && b.weak() && !weak)
}

/// What a request with nothing to run decides.
const EMPTY_RULE: &str = "builtin:empty";
const EMPTY_REASON: &str = "nothing to run";

/// Everything a policy found in one request: every rule match and engine
/// check, for every part of it, and which one decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evaluation {
    findings: Vec<Finding>,
    /// Index of the deciding finding.
    winner: Option<usize>,
    read_only: bool,
    needs_shell: bool,
    needs_key: bool,
    injected: Vec<InjectedFlag>,
    /// For the winner, when it refuses: an allowed alternative.
    suggestion: Option<String>,
}

impl Evaluation {
    /// Sets the winner's alternative (computed once the walk is over).
    pub(crate) fn suggest(&mut self, make: impl FnOnce(&Finding) -> Option<String>) {
        self.suggestion = self
            .winner()
            .filter(|f| f.verdict != Verdict::Allow)
            .and_then(make);
    }

    /// In the order the walk met them: raw patterns first, then each simple
    /// command with what is nested in it.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// The finding that decides: the strictest (see [`Verdict`]), the
    /// first of equals, a rule's allow before an engine-level one. `None`
    /// only when there is nothing to run.
    pub fn winner(&self) -> Option<&Finding> {
        self.winner.and_then(|i| self.findings.get(i))
    }

    /// The verdict the request gets.
    pub fn verdict(&self) -> Verdict {
        self.winner().map_or(Verdict::Allow, |f| f.verdict)
    }

    /// As [`Decision::read_only`].
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// As [`Decision::needs_shell`].
    pub fn needs_shell(&self) -> bool {
        self.needs_shell
    }

    /// As [`Decision::injected`].
    pub fn injected(&self) -> &[InjectedFlag] {
        &self.injected
    }

    /// The decision, exactly as [`Policy::decide`](crate::Policy::decide)
    /// returns it.
    pub fn decision(&self) -> Decision {
        match self.winner() {
            Some(f) => self.decision_from(f.clone()),
            None => self.empty_decision(),
        }
    }

    /// [`decision`](Self::decision), without copying the winner's strings.
    pub fn into_decision(mut self) -> Decision {
        match self.winner.take() {
            Some(i) => {
                let f = self.findings.swap_remove(i);
                self.decision_from(f)
            }
            None => self.empty_decision(),
        }
    }

    fn decision_from(&self, f: Finding) -> Decision {
        Decision {
            verdict: f.verdict,
            rule: f.rule,
            risk: f.risk,
            reason: f.reason,
            token: f.token,
            read_only: self.read_only,
            needs_shell: self.needs_shell,
            needs_key: self.needs_key,
            injected: self.injected.clone(),
            suggestion: self.suggestion.clone(),
        }
    }

    fn empty_decision(&self) -> Decision {
        Decision {
            verdict: Verdict::Allow,
            rule: EMPTY_RULE.into(),
            risk: RiskLevel::Low,
            reason: EMPTY_REASON.into(),
            token: None,
            read_only: self.read_only,
            needs_shell: self.needs_shell,
            needs_key: self.needs_key,
            injected: self.injected.clone(),
            suggestion: None,
        }
    }
}

/// The findings of one walk as they are offered. Keeping every one is the
/// evaluation; keeping only the winner is the decision's fast path, which
/// builds a finding's strings only when it wins.
pub(crate) struct Findings {
    every: bool,
    list: Vec<Finding>,
    winner: Option<usize>,
}

impl Findings {
    pub(crate) fn new(every: bool) -> Findings {
        Findings {
            every,
            list: Vec::new(),
            winner: None,
        }
    }

    /// Whether findings that cannot win are kept (and so worth describing).
    pub(crate) fn keeps_every(&self) -> bool {
        self.every
    }

    /// One check fired. `make` gives its rule, reason and token; it runs
    /// only when the finding is kept.
    pub(crate) fn offer(
        &mut self,
        verdict: Verdict,
        risk: RiskLevel,
        kind: FindingKind,
        command: Option<&CommandRef>,
        make: impl FnOnce() -> (String, String, Option<String>),
    ) {
        let best = self.winner.and_then(|i| self.list.get(i));
        let wins = takes_over(verdict, risk, is_weak(kind, verdict), best);
        if !wins && !self.every {
            return;
        }
        let (rule, reason, token) = make();
        let finding = Finding {
            verdict,
            risk,
            rule,
            reason,
            token,
            kind,
            command: if self.every { command.cloned() } else { None },
            superseded: false,
        };
        if !self.every {
            self.list.clear();
        }
        self.list.push(finding);
        if wins {
            self.winner = Some(self.list.len() - 1);
        }
    }

    /// A rule that matched and was passed over; kept only by an
    /// evaluation, and never the winner.
    pub(crate) fn superseded(
        &mut self,
        verdict: Verdict,
        risk: RiskLevel,
        command: Option<&CommandRef>,
        make: impl FnOnce() -> (String, String, Option<String>),
    ) {
        if !self.every {
            return;
        }
        let (rule, reason, token) = make();
        self.list.push(Finding {
            verdict,
            risk,
            rule,
            reason,
            token,
            kind: FindingKind::Rule,
            command: command.cloned(),
            superseded: true,
        });
    }

    pub(crate) fn finish(
        self,
        read_only: bool,
        needs_shell: bool,
        needs_key: bool,
        injected: Vec<InjectedFlag>,
    ) -> Evaluation {
        Evaluation {
            findings: self.list,
            winner: self.winner,
            read_only,
            needs_shell,
            needs_key,
            injected,
            suggestion: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offers in walk order; returns the winner's rule after each prefix.
    fn winners(every: bool, offers: &[(Verdict, RiskLevel, FindingKind, &str)]) -> Vec<String> {
        let mut findings = Findings::new(every);
        let mut out = Vec::new();
        for &(verdict, risk, kind, rule) in offers {
            findings.offer(verdict, risk, kind, None, || {
                (rule.to_string(), String::new(), None)
            });
            let winner = findings.winner.and_then(|i| findings.list.get(i));
            out.push(winner.map_or_else(String::new, |f| f.rule.clone()));
        }
        out
    }

    #[test]
    fn strictest_wins_first_of_equals_and_rules_beat_engine_allows() {
        use FindingKind::*;
        use RiskLevel::*;
        use Verdict::*;
        let offers = [
            (Allow, Low, Builtin, "builtin:cd"),
            (Allow, Low, Rule, "git-read"),
            (Allow, Low, Builtin, "builtin:shell-state"),
            (Allow, Low, Rule, "read-tools"),
            (Allow, Medium, Rule, "cargo"),
            (RequireApproval, Medium, Default, "default"),
            (Deny, High, Builtin, "builtin:path-escape"),
            (Deny, High, Rule, "deny-later"),
            (RequireApproval, Critical, Rule, "approval-critical"),
        ];
        let expected = [
            "builtin:cd",
            "git-read",
            "git-read",
            "git-read",
            "cargo",
            "default",
            "builtin:path-escape",
            "builtin:path-escape",
            "builtin:path-escape",
        ];
        for every in [false, true] {
            assert_eq!(winners(every, &offers), expected, "every: {every}");
        }
    }

    #[test]
    fn only_an_evaluation_keeps_the_losers_and_the_superseded() {
        for every in [false, true] {
            let mut findings = Findings::new(every);
            let describe = |rule: &str| (rule.to_string(), String::new(), None);
            findings.offer(
                Verdict::Deny,
                RiskLevel::High,
                FindingKind::Rule,
                None,
                || describe("deny"),
            );
            findings.offer(
                Verdict::Allow,
                RiskLevel::Low,
                FindingKind::Rule,
                None,
                || describe("allow"),
            );
            findings.superseded(Verdict::Allow, RiskLevel::Critical, None, || {
                describe("passed-over")
            });
            let e = findings.finish(false, true, false, Vec::new());
            let rules: Vec<_> = e.findings().iter().map(|f| f.rule.as_str()).collect();
            let kept: &[&str] = if every {
                &["deny", "allow", "passed-over"]
            } else {
                &["deny"]
            };
            assert_eq!(rules, kept);
            assert_eq!(e.winner().map(|f| f.rule.as_str()), Some("deny"));
            assert_eq!(e.clone().into_decision(), e.decision());
        }
    }

    #[test]
    fn nothing_to_run_is_an_allow() {
        let d = Findings::new(true)
            .finish(true, false, false, Vec::new())
            .into_decision();
        assert_eq!(
            (d.verdict, d.rule.as_str(), d.risk, d.read_only),
            (Verdict::Allow, EMPTY_RULE, RiskLevel::Low, true)
        );
    }
}
