//! A wildcard in `[env] keep` never lets a secret-looking variable through,
//! even when the policy's own `secret_pattern` does not know the word:
//! the planted secret's bytes are absent from what the child's `env`
//! prints, through the real CLI.

mod strict_common;

use strict_common::*;

#[test]
fn a_wildcard_keep_does_not_pass_a_planted_secret() {
    // A narrow custom pattern (only OpenAI keys), as an operator might
    // write it, and the locale wildcard every shipped policy keeps.
    let case = Case::new(
        "keep = [\"LANG\", \"LC_*\"]\nsecret_pattern = \"^OPENAI_\"\n",
        None,
    );
    let secret = format!("sk-canary-{}", token());
    let case = case
        .env("LC_API_TOKEN", &secret)
        .env("LC_DB_PASSWORD", &secret)
        .env("LC_TIME", "C.UTF-8")
        .env("OPENAI_API_KEY", &secret);
    let v = case.run(&["--", "/usr/bin/env"]);
    assert_eq!(v["ok"], true, "{v:#}");
    let out = stdout(&v);
    assert!(!out.contains(&secret), "a secret reached the child: {out}");
    // The wildcard still does its job for what is not secret-looking.
    assert!(out.contains("LC_TIME=C.UTF-8"), "{out}");
    let scrubbed: Vec<&str> = v["env_scrubbed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    for name in ["LC_API_TOKEN", "LC_DB_PASSWORD", "OPENAI_API_KEY"] {
        assert!(scrubbed.contains(&name), "{name} not in {scrubbed:?}");
    }
    assert!(
        !v.to_string().contains(&secret),
        "the secret is in the result"
    );
}
