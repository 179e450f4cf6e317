//! Scrubbing secrets out of everything a trace stores.
//!
//! Traces outlive the run and get shared (bug reports, eval artifacts), so
//! redaction runs before any byte reaches the file and errs on the side of
//! hiding too much: a lost preview character costs nothing, a leaked token
//! costs a rotation.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

/// What replaces a secret. Stable so tests and readers can count hits.
pub const REDACTED: &str = "[REDACTED]";

/// Values shorter than this are not scrubbed literally: replacing every `1`
/// or `on` in a trace would destroy it without protecting anything.
const MIN_LITERAL_LEN: usize = 6;

/// Tokens at least this long are checked for entropy.
const ENTROPY_MIN_LEN: usize = 24;
/// Bits per character above which a long token is taken for a key. Hex
/// (hashes, commit ids) tops out at 4.0 and stays readable; base64-ish
/// random material sits well above.
const ENTROPY_THRESHOLD: f64 = 4.2;

// The patterns below are constants: compiling them cannot depend on input,
// and the unit tests exercise every one of them.
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("built-in redaction pattern {pattern:?}: {e}"))
}

static PRIVATE_KEY_BLOCK: LazyLock<Regex> = LazyLock::new(|| {
    re(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)")
});

/// Key shapes with a recognisable prefix (AWS, GitHub, OpenAI/Anthropic,
/// Slack, Google, Stripe) and JWTs.
static KEY_SHAPES: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b",
        r"|\bgh[pousr]_[A-Za-z0-9]{30,}",
        r"|\bgithub_pat_[A-Za-z0-9_]{20,}",
        r"|\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}",
        r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}",
        r"|\bAIza[0-9A-Za-z_\-]{30,}",
        r"|\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}",
        r"|\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    ))
});

/// `Authorization: Bearer x`, `token x`, `Basic x`.
static AUTH_SCHEME: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(bearer|basic|token)(\s+)([A-Za-z0-9._~+/=\-]{8,})"));

/// Credentials embedded in URLs: `scheme://user:password@host`.
static URL_CREDENTIALS: LazyLock<Regex> = LazyLock::new(|| re(r"(://[^/\s:@]+:)([^/\s@]+)(@)"));

/// `NAME=value`, `NAME: value`, `"name": "value"` where NAME contains a
/// word secret names are made of; redacted where NAME is secret by
/// [`is_secret_name`] (`GIT_AUTHOR_NAME` has `auth` in it, and is not).
static NAMED_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)([A-Za-z0-9_.\-]*(?:key|token|secret|auth|cookie|bearer|private|pass|pwd|cred|jwt)[A-Za-z0-9_.\-]*)("?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s&;|"',}]+)"#,
    )
});

/// `--password value`, `--token value` (the space-separated flag form).
static SECRET_FLAG: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(--?[a-z0-9\-]*(?:password|passwd|token|secret|api-key|apikey|access-key)[a-z0-9\-]*)(\s+)([^\s\-][^\s]*)",
    )
});

static LONG_TOKEN: LazyLock<Regex> = LazyLock::new(|| re(r"[A-Za-z0-9+_\-=]{24,}"));

/// Redacts strings before they are written. Built once per trace.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Values of secret-named variables in the supervisor's environment,
    /// longest first so a value containing another is replaced whole.
    literals: Vec<String>,
}

impl Redactor {
    /// Collects the values to scrub literally: the variables named in
    /// `secret_names` plus every variable of this process whose name looks
    /// secret. A child never sees those (the environment is rebuilt), but
    /// an agent may paste them into a command line.
    pub fn new(secret_names: &[String]) -> Redactor {
        let mut literals: Vec<String> = Vec::new();
        for (name, value) in std::env::vars_os()
            .filter_map(|(n, v)| Some((n.into_string().ok()?, v.into_string().ok()?)))
        {
            let named = secret_names.iter().any(|s| s == &name);
            if (named || is_secret_name(&name)) && value.len() >= MIN_LITERAL_LEN {
                literals.push(value);
            }
        }
        literals.sort_by_key(|v| std::cmp::Reverse(v.len()));
        literals.dedup();
        Redactor { literals }
    }

    /// A redactor that scrubs the given values literally (tests, tools).
    pub fn with_literals(mut literals: Vec<String>) -> Redactor {
        literals.retain(|v| v.len() >= MIN_LITERAL_LEN);
        literals.sort_by_key(|v| std::cmp::Reverse(v.len()));
        literals.dedup();
        Redactor { literals }
    }

    /// Returns the input untouched (no allocation) when nothing matches.
    pub fn redact<'a>(&self, input: &'a str) -> Cow<'a, str> {
        let mut out: Cow<'a, str> = Cow::Borrowed(input);
        for lit in &self.literals {
            if out.contains(lit.as_str()) {
                out = Cow::Owned(out.replace(lit.as_str(), REDACTED));
            }
        }
        out = apply(out, &PRIVATE_KEY_BLOCK, |_| REDACTED.to_string());
        out = apply(out, &KEY_SHAPES, |_| REDACTED.to_string());
        out = apply(out, &URL_CREDENTIALS, |c| {
            format!("{}{REDACTED}{}", &c[1], &c[3])
        });
        out = apply(out, &AUTH_SCHEME, |c| {
            format!("{}{}{REDACTED}", &c[1], &c[2])
        });
        out = apply(out, &NAMED_VALUE, |c| {
            if !is_secret_name(&c[1])
                || &c[3] == REDACTED
                || c[3].trim_matches(['"', '\'']) == REDACTED
            {
                c[0].to_string()
            } else {
                format!("{}{}{REDACTED}", &c[1], &c[2])
            }
        });
        out = apply(out, &SECRET_FLAG, |c| {
            format!("{}{}{REDACTED}", &c[1], &c[2])
        });
        out = apply(out, &LONG_TOKEN, |c| {
            let tok = &c[0];
            if looks_random(tok) {
                REDACTED.to_string()
            } else {
                tok.to_string()
            }
        });
        out
    }

    /// Redacts every string (and every object value under a secret-looking
    /// key) in a JSON value.
    pub fn redact_value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.redact(s).into_owned()),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.redact_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let v = if is_secret_name(k)
                            && matches!(v, Value::String(_) | Value::Number(_))
                        {
                            Value::String(REDACTED.to_string())
                        } else {
                            self.redact_value(v)
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// Whether a variable or field name looks like it holds a secret: the
/// policy crate's matcher, so the child's scrubbed environment and the
/// trace agree on what a secret is.
pub fn is_secret_name(name: &str) -> bool {
    agent_exec_policy::is_secret_name(name)
}

fn apply<'a>(input: Cow<'a, str>, re: &Regex, rep: impl Fn(&Captures) -> String) -> Cow<'a, str> {
    if !re.is_match(&input) {
        return input;
    }
    let replaced = re.replace_all(&input, |c: &Captures| rep(c)).into_owned();
    Cow::Owned(replaced)
}

/// A long token of mixed letters and digits with high Shannon entropy.
fn looks_random(tok: &str) -> bool {
    let bytes = tok.as_bytes();
    if bytes.len() < ENTROPY_MIN_LEN {
        return false;
    }
    let has_digit = bytes.iter().any(u8::is_ascii_digit);
    let has_upper = bytes.iter().any(u8::is_ascii_uppercase);
    let has_lower = bytes.iter().any(u8::is_ascii_lowercase);
    if !(has_digit && has_upper && has_lower) {
        return false;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[b as usize] += 1;
    }
    let len = bytes.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum();
    entropy >= ENTROPY_THRESHOLD
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> String {
        Redactor::with_literals(vec!["hunter2-literal".into()])
            .redact(s)
            .into_owned()
    }

    #[test]
    fn leaves_ordinary_text_borrowed() {
        let red = Redactor::with_literals(vec![]);
        let s = "ls -la src && git status --short | grep '^ M' > out.txt";
        assert!(matches!(red.redact(s), Cow::Borrowed(_)));
    }

    #[test]
    fn keeps_hex_hashes_and_paths() {
        let h = "e7e9cc8b1b85264074fbcc02a88680c4096b1e47df8f739dceb03bf482f04bd6";
        assert_eq!(r(h), h);
        let p = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
        assert_eq!(r(p), p);
    }

    #[test]
    fn scrubs_key_shapes() {
        for secret in [
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "github_pat_11ABCDEFG0123456789_abcdefghijkl",
            "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
            "xoxb-1234567890-abcdefghij",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        ] {
            let out = r(&format!("echo {secret} done"));
            assert!(!out.contains(secret), "{secret} leaked: {out}");
            assert!(out.contains(REDACTED) && out.ends_with(" done"), "{out}");
        }
    }

    #[test]
    fn scrubs_named_values_and_flags() {
        let out = r("API_KEY=abc123def GITHUB_TOKEN='q w e' mysql --password s3cr3tpw -u root");
        assert!(
            !out.contains("abc123def") && !out.contains("q w e") && !out.contains("s3cr3tpw"),
            "{out}"
        );
        assert!(
            out.contains("API_KEY=[REDACTED]") && out.contains("-u root"),
            "{out}"
        );
        let out = r(r#"{"password": "pw-value-1"}"#);
        assert!(!out.contains("pw-value-1"), "{out}");
    }

    #[test]
    fn names_that_only_look_alike_keep_their_values() {
        let out = r(
            "GIT_AUTHOR_NAME=adalove KEYBOARD_LAYOUT=dvorak-x NPM_TOKEN=npm0abc123 apiKey: k3y-v4lue",
        );
        assert!(out.contains("GIT_AUTHOR_NAME=adalove"), "{out}");
        assert!(out.contains("KEYBOARD_LAYOUT=dvorak-x"), "{out}");
        assert!(out.contains("NPM_TOKEN=[REDACTED]"), "{out}");
        assert!(out.contains("apiKey: [REDACTED]"), "{out}");
        assert!(
            !out.contains("npm0abc123") && !out.contains("k3y-v4lue"),
            "{out}"
        );
    }

    #[test]
    fn scrubs_bearer_url_credentials_and_pem() {
        let out = r(
            "curl -H 'Authorization: Bearer abcdefgh12345678' https://bob:pa55word@example.com/x",
        );
        assert!(
            !out.contains("abcdefgh12345678") && !out.contains("pa55word"),
            "{out}"
        );
        assert!(
            out.contains("https://bob:[REDACTED]@example.com/x"),
            "{out}"
        );
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----";
        assert_eq!(r(pem), REDACTED);
    }

    #[test]
    fn scrubs_high_entropy_tokens_and_literals() {
        let tok = "Zx8Qm2Lp9Vt4Rk7Wn3Bc6Yh1Jd5Fg0Ss";
        assert_eq!(r(&format!("x {tok} y")), "x [REDACTED] y");
        assert_eq!(r("say hunter2-literal now"), "say [REDACTED] now");
    }

    #[test]
    fn redacts_json_values_under_secret_keys() {
        let red = Redactor::with_literals(vec![]);
        let v = serde_json::json!({"command": "echo hi", "env": {"DB_PASSWORD": "x1"}, "n": 3});
        let out = red.redact_value(&v);
        assert_eq!(out["env"]["DB_PASSWORD"], REDACTED);
        assert_eq!(out["command"], "echo hi");
        assert_eq!(out["n"], 3);
    }
}
