//! The one rendering of an approval a human reads, wherever it is shown:
//! the terminal prompt (`--approve tty`), `agent-exec approvals` and
//! `agent-exec approve`.

use crate::policy::RiskLevel;
use crate::service::terminal::visible;

/// The risk, rule, reason and command on lines of their own, every
/// control, bidi and invisible character in them escaped, so the command
/// shown is the command that runs.
pub fn render(risk: RiskLevel, rule: &str, reason: &str, command: &str) -> String {
    format!(
        "agent-exec: approval required ({risk:?} risk, rule {}): {}\n  command: {}",
        visible(rule),
        visible(reason),
        visible(command)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_escaped_and_stays_on_its_line() {
        let r = render(
            RiskLevel::High,
            "r\x1b[2K",
            "why\u{202e}",
            "rm -rf x\n  command: ls",
        );
        assert_eq!(
            r,
            "agent-exec: approval required (High risk, rule r\\x1b[2K): why\\u{202e}\n  command: rm -rf x\\x0a  command: ls"
        );
        assert_eq!(r.lines().count(), 2);
    }
}
