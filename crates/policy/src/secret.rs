//! What counts as a secret: the one matcher behind the child's scrubbed
//! environment (the default `[env] secret_pattern`) and the trace
//! redactor.
//!
//! A name is secret when one of its words is a secret word, or ends in
//! one. Words are the runs of letters between `_`, `-`, `.`, digits or a
//! lower-to-upper case change, so `AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`,
//! `OPENAI_API_KEY`, `apiKey` and `PGPASSWORD` are secret while
//! `GIT_AUTHOR_NAME` (`AUTHOR` is not `AUTH`), `OAUTHLIB_INSECURE_TRANSPORT`,
//! `KEYBOARD_LAYOUT` and `TOKENIZERS_PARALLELISM` are not. A value is
//! secret on its own when it is a URL with a password in it
//! (`DATABASE_URL=postgres://app:hunter2@db/app`).

use std::sync::LazyLock;

/// The default `[env] secret_pattern`: a regex over variable names,
/// matched case-insensitively, equal to [`is_secret_name`]'s rule for
/// names of letters, digits, `_`, `-` and `.` (a custom pattern replaces
/// it for the policy's own decisions; see [`crate::Policy::env_fate`]).
pub const DEFAULT_SECRET_PATTERN: &str = concat!(
    "(?i)",
    // A whole word (an `s` may follow).
    "(^|[^a-z])(key|token|secret|auth|authorization|cookie|bearer|private|pass|passwd|",
    "credentials?|creds|jwt|apikey|privatekey|accesskey)s?([^a-z]|$)",
    // A word that ends in one.
    "|[a-z](key|token|secret|passwd|password)s?([^a-z]|$)",
    // `pwd` as a later word (`MYSQL_PWD`; the shell's `PWD` is a directory).
    "|[a-z0-9][^a-z0-9]pwd([^a-z]|$)",
    // Anywhere.
    "|passw|secret|credential|passphrase",
);

static SECRET_NAME: LazyLock<regex_lite::Regex> = LazyLock::new(|| {
    regex_lite::RegexBuilder::new(DEFAULT_SECRET_PATTERN)
        .case_insensitive(true)
        .build()
        .unwrap_or_else(|e| panic!("built-in secret pattern: {e}"))
});

/// Credentials in a URL: `scheme://user:password@`.
static URL_PASSWORD: LazyLock<regex_lite::Regex> = LazyLock::new(|| {
    regex_lite::Regex::new(r"://[^/\s:@]*:[^/\s@]+@")
        .unwrap_or_else(|e| panic!("built-in URL password pattern: {e}"))
});

/// Whether a variable, option or field name looks like it holds a secret,
/// by the built-in rule. camelCase names (`apiKey`) are split where the
/// case changes.
pub fn is_secret_name(name: &str) -> bool {
    if SECRET_NAME.is_match(name) {
        return true;
    }
    // `apiKey`, `authToken`: a lower-to-upper change starts a word, which
    // the regex (case-insensitive) cannot see.
    let b = name.as_bytes();
    let camel = b
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    if !camel {
        return false;
    }
    let mut split = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.chars() {
        if prev_lower && c.is_ascii_uppercase() {
            split.push('_');
        }
        prev_lower = c.is_ascii_lowercase();
        split.push(c);
    }
    SECRET_NAME.is_match(&split)
}

/// Whether a value is a secret whatever its name: a URL carrying a
/// password.
pub fn is_secret_value(value: &str) -> bool {
    value.contains("://") && URL_PASSWORD.is_match(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_secret_names_are_secret() {
        for name in [
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "NPM_TOKEN",
            "PGPASSWORD",
            "MYSQL_PWD",
            "DB_PASS",
            "HF_TOKEN",
            "SSH_AUTH_SOCK",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "STRIPE_SECRET",
            "SIGNING_KEY",
            "KEY",
            "TWINE_PASSWORD",
            "CI_JOB_JWT",
            "GPG_PASSPHRASE",
            "LC_API_TOKEN",
            "LC_db_Password",
            "apiKey",
            "authToken",
            "clientSecret",
            "access_key2",
            "Authorization",
            "x-api-key",
            "--password",
            "session.cookie",
        ] {
            assert!(is_secret_name(name), "{name} should be secret");
        }
    }

    #[test]
    fn ordinary_names_are_not() {
        for name in [
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME",
            "AUTHOR",
            "OAUTHLIB_INSECURE_TRANSPORT",
            "KEYBOARD_LAYOUT",
            "TOKENIZERS_PARALLELISM",
            "XDG_SESSION_TYPE",
            "SSL_CERT_FILE",
            "DATABASE_URL",
            "PATH",
            "HOME",
            "LANG",
            "LC_ALL",
            "PYTHONHASHSEED",
            "GIT_ASKPASS",
            "DEBIAN_FRONTEND",
            "PWD",
            "OLDPWD",
            "authorName",
        ] {
            assert!(!is_secret_name(name), "{name} should not be secret");
        }
    }

    #[test]
    fn the_default_pattern_compiles_as_a_policy_pattern() {
        // The same text compiles where a policy's own pattern would.
        assert!(SECRET_NAME.is_match("NPM_TOKEN"));
    }

    #[test]
    fn urls_with_passwords_are_secret_values() {
        assert!(is_secret_value("postgres://app:hunter2@db:5432/app"));
        assert!(is_secret_value("https://:tok@example.org"));
        assert!(!is_secret_value("postgres://app@db/app"));
        assert!(!is_secret_value("https://example.org:8443/x"));
        assert!(!is_secret_value("plain"));
    }
}
