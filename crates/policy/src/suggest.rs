//! Refusals that teach: for the finding that refused a request, a form
//! the policy would allow, named concretely. A rule may state its own
//! (`suggestion` in the TOML); a program no rule covers gets the forms its
//! rules do allow; engine checks get the usual way around them.

use crate::resolve::basename;
use crate::verdict::{Finding, FindingKind};
use crate::{Policy, Verdict};

/// At most this many allowed forms are listed.
const MAX_FORMS: usize = 40;

impl Policy {
    /// An allowed alternative to what `f` refused, if the policy knows one.
    pub(crate) fn suggestion_for(&self, f: &Finding) -> Option<String> {
        match f.kind {
            FindingKind::Rule => self
                .engine
                .rules
                .all()
                .iter()
                .find(|r| r.id == f.rule)
                .and_then(|r| r.suggestion.clone()),
            FindingKind::Default => self.allowed_forms(f.token.as_deref()?),
            FindingKind::Builtin => builtin(&f.rule).map(str::to_string),
        }
    }

    /// What the allow rules for `prog` cover, when they cover only some
    /// of its uses: `git status`, `git diff`, ...
    pub(crate) fn allowed_forms(&self, prog: &str) -> Option<String> {
        let name = basename(prog);
        let mut forms: Vec<String> = Vec::new();
        for rule in self.engine.rules.all() {
            if rule.action != Verdict::Allow || !rule.programs.iter().any(|p| p == name) {
                continue;
            }
            // Subcommands by their first word (`git branch`, not each of
            // `git branch -r`, `git branch -a`): what to look up first.
            let words = rule
                .subcommands
                .iter()
                .filter_map(|s| s.first().cloned())
                .chain((!rule.prefix.is_empty()).then(|| rule.prefix.join(" ")));
            for w in words {
                let form = format!("`{name} {w}`");
                if !forms.contains(&form) {
                    forms.push(form);
                }
            }
        }
        if forms.is_empty() {
            return None;
        }
        let more = forms.len().saturating_sub(MAX_FORMS);
        forms.truncate(MAX_FORMS);
        let mut out = format!("allowed forms of `{name}`: {}", forms.join(", "));
        if more > 0 {
            out.push_str(&format!(" and {more} more"));
        }
        Some(out)
    }
}

/// The usual way around an engine check.
fn builtin(rule: &str) -> Option<&'static str> {
    Some(match rule {
        "builtin:path-escape" => {
            "use a path inside the project root (relative to it), or /tmp for scratch files where the run has its own"
        }
        "builtin:expansion-path" => "write the path literally, relative to the project root",
        "builtin:unsupported" => {
            "send the plain commands joined by `&&`, `;` or `|` (if/for/while/case are fine where the policy checks control flow)"
        }
        "builtin:program-expansion" => {
            "name the program literally: `git status`, not `$GIT status`"
        }
        "builtin:unsafe-wrapper" => "run the inner command directly, without the wrapper",
        "builtin:cd" => {
            "`cd` to a literal directory inside the project root, or pass paths relative to it"
        }
        "builtin:protected-path" => {
            "name what to delete: `find . -name '*.pyc' -delete`, or start find in the directory concerned (`find build -delete`)"
        }
        "builtin:assignment" => {
            "drop the assignment, or set the variable through the policy's [env] set"
        }
        "builtin:substitution" => "run the inner command on its own and use its output",
        _ => return None,
    })
}
