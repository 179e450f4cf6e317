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

use std::sync::{Arc, LazyLock, OnceLock};

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

/// Every match of [`DEFAULT_SECRET_PATTERN`] contains one of these words
/// (ASCII case aside): each alternative of the pattern names one of them
/// or a longer word that holds one (`authorization`, `passwd`, `apikey`,
/// `credentials`). A name holding none is not secret by that pattern, and
/// the regex need not run: most names (`PATH`, `HOME`, `LANG`) hold none.
/// Why: matching a one-shot call's environment with regex-lite's PikeVM
/// was 2.6% of the call (80 µs; BENCHMARKS.md). A test holds the two to
/// the same answers.
const DEFAULT_PATTERN_WORDS: &[&str] = &[
    "key", "token", "secret", "auth", "cookie", "bearer", "private", "pass", "cred", "jwt", "pwd",
];

/// Whether `name` holds one of [`DEFAULT_PATTERN_WORDS`].
fn may_match_default(name: &str) -> bool {
    let name = name.as_bytes();
    DEFAULT_PATTERN_WORDS.iter().any(|w| {
        name.windows(w.len())
            .any(|win| win.eq_ignore_ascii_case(w.as_bytes()))
    })
}

static SECRET_NAME: LazyLock<regex_lite::Regex> = LazyLock::new(|| {
    regex_lite::RegexBuilder::new(DEFAULT_SECRET_PATTERN)
        .case_insensitive(true)
        .build()
        .unwrap_or_else(|e| panic!("built-in secret pattern: {e}"))
});

/// `[env] secret_pattern`, as a policy holds it: compiled at a full load
/// (which reports an invalid pattern), and on first use, or ahead of it on
/// another thread, for a policy read from the compiled-policy cache.
///
/// Why lazily: building the code policy's pattern was a fifth of a cached
/// load (80 µs of 380, BENCHMARKS.md), and the first name it meets comes
/// a millisecond later, when the run's environment is classified. The
/// compiled form is shared by the clones, like a rule's regex.
#[derive(Debug, Clone)]
pub(crate) struct SecretNames {
    source: String,
    /// The source is [`DEFAULT_SECRET_PATTERN`]: its words are checked
    /// first (decided once, not per name).
    default: bool,
    compiled: Arc<OnceLock<Option<regex_lite::Regex>>>,
}

impl SecretNames {
    /// Compiled now: a full load refuses a pattern that does not compile.
    pub(crate) fn compiled(pattern: &str) -> Result<SecretNames, regex_lite::Error> {
        let re = compile_secret_pattern(pattern)?;
        Ok(SecretNames {
            source: pattern.to_string(),
            default: pattern == DEFAULT_SECRET_PATTERN,
            compiled: Arc::new(OnceLock::from(Some(re))),
        })
    }

    /// Compiled on first use: a cached pattern compiled at the full load
    /// this same binary made of the same policy bytes.
    pub(crate) fn lazy(pattern: String) -> SecretNames {
        SecretNames {
            default: pattern == DEFAULT_SECRET_PATTERN,
            source: pattern,
            compiled: Arc::new(OnceLock::new()),
        }
    }

    /// Whether `name` matches. A pattern that fails to compile (only a
    /// damaged cache entry could hold one) calls every name secret: the
    /// child then gets no variable the policy did not set itself.
    pub(crate) fn is_match(&self, name: &str) -> bool {
        if self.default && !may_match_default(name) {
            return false;
        }
        self.compiled
            .get_or_init(|| compile_secret_pattern(&self.source).ok())
            .as_ref()
            .is_none_or(|re| re.is_match(name))
    }

    /// A handle that compiles the pattern when called, from any thread.
    pub(crate) fn compiler(&self) -> impl FnOnce() + Send + 'static {
        let source = self.source.clone();
        let cell = Arc::clone(&self.compiled);
        move || {
            cell.get_or_init(|| compile_secret_pattern(&source).ok());
        }
    }

    /// Whether it is compiled already (without compiling it).
    pub(crate) fn is_compiled(&self) -> bool {
        self.compiled.get().is_some()
    }
}

/// regex-lite: this pattern only ever meets a few dozen short variable
/// names, so building it (15x faster than a full regex, measured) is what
/// counts; its case folding is ASCII, like the other policy regexes.
fn compile_secret_pattern(pattern: &str) -> Result<regex_lite::Regex, regex_lite::Error> {
    regex_lite::RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
}

/// Credentials in a URL: `scheme://user:password@`.
static URL_PASSWORD: LazyLock<regex_lite::Regex> = LazyLock::new(|| {
    regex_lite::Regex::new(r"://[^/\s:@]*:[^/\s@]+@")
        .unwrap_or_else(|e| panic!("built-in URL password pattern: {e}"))
});

/// Whether a variable, option or field name looks like it holds a secret,
/// by the built-in rule. camelCase names (`apiKey`) are split where the
/// case changes.
pub fn is_secret_name(name: &str) -> bool {
    // Splitting camelCase only adds `_`, which no word holds.
    if !may_match_default(name) {
        return false;
    }
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

    #[test]
    fn a_lazy_pattern_matches_like_a_compiled_one_and_fails_closed() {
        let now = SecretNames::compiled(DEFAULT_SECRET_PATTERN).unwrap();
        let later = SecretNames::lazy(DEFAULT_SECRET_PATTERN.to_string());
        assert!(now.is_compiled() && !later.is_compiled());
        for name in [
            "GITHUB_TOKEN",
            "apikey",
            "HOME",
            "LANG",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert_eq!(later.is_match(name), now.is_match(name), "{name}");
        }
        assert!(later.is_compiled());
        // A clone shares what the handle compiles.
        let clone = SecretNames::lazy("TOKEN".into());
        let shared = clone.clone();
        clone.compiler()();
        assert!(shared.is_compiled() && shared.is_match("my_token"));
        // A pattern that cannot compile (a full load refuses it) calls
        // every name secret: nothing unlisted reaches the child.
        assert!(SecretNames::compiled("(").is_err());
        let broken = SecretNames::lazy("(".into());
        assert!(broken.is_match("HOME") && broken.is_match("PATH"));
    }

    /// The words the default pattern needs, checked against the regex
    /// itself: every name it matches holds one.
    fn default_words_agree(name: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let full = SecretNames::compiled(DEFAULT_SECRET_PATTERN)
            .map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        let regex_says = SECRET_NAME.is_match(name);
        proptest::prop_assert!(!regex_says || may_match_default(name), "{name}");
        proptest::prop_assert_eq!(full.is_match(name), regex_says, "{}", name);
        Ok(())
    }

    #[test]
    fn the_default_words_hold_for_known_names() {
        let names = [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "PGPASSWORD",
            "MYSQL_PWD",
            "apiKey",
            "Authorization",
            "x-api-key",
            "session.cookie",
            "NPM_TOKENS",
            "JWT",
            "my_creds",
            "PASSPHRASE",
            "PATH",
            "HOME",
            "LANG",
            "PWD",
            "OLDPWD",
            "TOKENIZERS_PARALLELISM",
            "KEYBOARD_LAYOUT",
            "GIT_AUTHOR_NAME",
            "OAUTHLIB_INSECURE_TRANSPORT",
            "",
        ];
        for name in names {
            default_words_agree(name).unwrap();
        }
    }

    proptest::proptest! {
        /// Names made of the pattern's words, their near misses, separators
        /// and any case: the regex never matches one the words rule out.
        #[test]
        fn the_default_words_never_hide_a_match(
            name in "([A-Za-z0-9_.-]{0,3}(?i:key|token|secret|auth|authorization|cookie|bearer|private|pass|passwd|password|passw|credentials?|creds|jwt|apikey|privatekey|accesskey|pwd|ke|toke|secre|aut|cooki|beare|privat|pas|cre|jw|pw|phrase|ential)s?){1,4}[A-Za-z0-9_.-]{0,3}|\\PC{0,16}"
        ) {
            default_words_agree(&name)?;
        }
    }
}
