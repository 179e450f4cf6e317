//! Policies that compose: an overlay extends a shipped policy or a file
//! with rules and examples, is loaded only from a place the run cannot
//! write, and the service can layer more rules on a loaded policy.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use agent_exec_policy::{CommandSpec, Context, Policy, PolicyError, Verdict};

const OVERLAY: &str = r#"
extends = "code"
name = "project"

[[rule]]
id = "terraform-plan"
action = "allow"
program = "terraform"
subcommands = ["plan", "validate"]
risk = "medium"
reason = "Plans without applying."

[[rule]]
id = "curl-local"
action = "allow"
program = "curl"
args_regex = '^https?://localhost'
risk = "low"
reason = "An allow rule cannot undo the base's deny."

[[example]]
command = "terraform plan"
decision = "allow"
rule = "terraform-plan"
"#;

/// A private directory (0700, owned by the test's user) outside `/tmp`'s
/// scratch judgement, holding `name` with `text`.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path
}

fn private_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

fn decide(p: &Policy, cmd: &str) -> (Verdict, String) {
    let root = Path::new("/nonexistent-overlay-root");
    let ctx = Context { root, cwd: root };
    let d = p.decide(&CommandSpec::Shell(cmd.into()), &ctx).unwrap();
    (d.verdict, d.rule)
}

/// `agent-exec` itself refuses overlays in group/world-writable places;
/// the temp directories the tests use must not be those.
fn parents_are_private(dir: &Path) -> bool {
    dir.ancestors().skip(1).all(|p| {
        let m = std::fs::metadata(p).unwrap();
        m.permissions().mode() & 0o022 == 0 || m.permissions().mode() & 0o1000 != 0
    })
}

#[test]
fn an_overlay_adds_rules_to_a_shipped_policy() {
    let dir = private_dir();
    assert!(parents_are_private(dir.path()));
    let path = write(dir.path(), "project.toml", OVERLAY);
    let p = Policy::load(&path).unwrap();
    assert_eq!(p.name, "project");
    assert_eq!(
        decide(&p, "terraform plan"),
        (Verdict::Allow, "terraform-plan".into())
    );
    // The base's deny still wins over an added allow.
    assert_eq!(decide(&p, "curl http://localhost/x").0, Verdict::Deny);
    // The base's own rules are all there.
    assert_eq!(
        decide(&p, "git status"),
        (Verdict::Allow, "git-read".into())
    );
    assert_eq!(decide(&p, "terraform apply").1, "default");
    let layers = p.layers();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0].1, 2);
    // Bound to base and overlay both.
    let base =
        Policy::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/code.toml"))
            .unwrap();
    assert_ne!(p.sha256, base.sha256);
}

#[test]
fn an_overlay_may_extend_a_file_next_to_it() {
    let dir = private_dir();
    write(
        dir.path(),
        "base.toml",
        "name = \"b\"\ndefault = \"deny\"\n[[rule]]\nid = \"ls\"\naction = \"allow\"\nprogram = \"ls\"\nrisk = \"low\"\nreason = \"x\"\n",
    );
    let path = write(
        dir.path(),
        "over.toml",
        "extends = \"./base.toml\"\n[[rule]]\nid = \"wc\"\naction = \"allow\"\nprogram = \"wc\"\nrisk = \"low\"\nreason = \"x\"\n",
    );
    let p = Policy::load(&path).unwrap();
    assert_eq!(decide(&p, "ls").0, Verdict::Allow);
    assert_eq!(decide(&p, "wc -l x").0, Verdict::Allow);
    assert_eq!(decide(&p, "cat x").0, Verdict::Deny);
    // The base file is guarded as well: make it world-writable.
    std::fs::set_permissions(
        dir.path().join("base.toml"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    assert!(matches!(
        Policy::load(&path),
        Err(PolicyError::UnsafeOverlay { .. })
    ));
}

#[test]
fn an_overlay_the_run_or_another_user_could_write_is_refused() {
    // Group-writable file.
    let dir = private_dir();
    let path = write(dir.path(), "o.toml", OVERLAY);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
    let err = Policy::load(&path).unwrap_err();
    assert!(matches!(err, PolicyError::UnsafeOverlay { .. }), "{err}");
    assert!(err.to_string().contains("writable"), "{err}");

    // A world-writable directory above it (not sticky).
    let dir = private_dir();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = write(&open, "o.toml", OVERLAY);
    assert!(matches!(
        Policy::load(&path),
        Err(PolicyError::UnsafeOverlay { .. })
    ));

    // Owned by another user (the tests run as root, which may chown).
    let dir = private_dir();
    let path = write(dir.path(), "o.toml", OVERLAY);
    if std::os::unix::fs::chown(&path, Some(4321), None).is_ok() {
        let err = Policy::load(&path).unwrap_err();
        assert!(err.to_string().contains("uid 4321"), "{err}");
    }

    // Inside the project root: loadable, refused once the root is known.
    let dir = private_dir();
    let path = write(dir.path(), "o.toml", OVERLAY);
    let p = Policy::load(&path).unwrap();
    assert!(
        p.check_layers_outside(Path::new("/nonexistent-elsewhere"))
            .is_ok()
    );
    let err = p.check_layers_outside(dir.path()).unwrap_err();
    assert!(matches!(err, PolicyError::UnsafeOverlay { .. }), "{err}");
}

#[test]
fn extends_must_name_a_shipped_policy_or_a_file() {
    let dir = private_dir();
    let path = write(dir.path(), "o.toml", "extends = \"nonesuch\"\n");
    let err = Policy::load(&path).unwrap_err();
    assert!(matches!(err, PolicyError::Extends { .. }), "{err}");
    assert!(err.to_string().contains("code"), "{err}");
    // An overlay may not change the base's settings.
    let path = write(
        dir.path(),
        "o2.toml",
        "extends = \"code\"\n[limits]\ntimeout_ms = 1\n",
    );
    assert!(matches!(
        Policy::load(&path),
        Err(PolicyError::Syntax { .. })
    ));
    // Overlays extending themselves stop.
    let path = write(dir.path(), "loop.toml", "extends = \"./loop.toml\"\n");
    assert!(matches!(
        Policy::load(&path),
        Err(PolicyError::Extends { .. })
    ));
}

#[test]
fn the_service_can_layer_remembered_rules() {
    let base =
        Policy::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/code.toml"))
            .unwrap();
    assert_eq!(decide(&base, "terraform plan").0, Verdict::RequireApproval);
    let amended = base
        .with_overlay(
            "[[rule]]\nid = \"approved-1\"\naction = \"allow\"\nprogram = \"terraform\"\nsubcommands = [\"plan\"]\nrisk = \"medium\"\nreason = \"Approved by a human.\"\n\n[[example]]\ncommand = \"terraform plan\"\ndecision = \"allow\"\n",
            "approvals",
        )
        .unwrap();
    assert_eq!(
        decide(&amended, "terraform plan"),
        (Verdict::Allow, "approved-1".into())
    );
    assert_eq!(
        decide(&amended, "terraform apply").0,
        Verdict::RequireApproval
    );
    assert_eq!(amended.layers(), [("approvals".to_string(), 1)]);
    // Ids stay unique across layers; `extends` has no place here.
    let dup = base.with_overlay(
        "[[rule]]\nid = \"git-read\"\naction = \"allow\"\nprogram = \"tf\"\nrisk = \"low\"\nreason = \"x\"\n",
        "approvals",
    );
    assert!(matches!(dup, Err(PolicyError::Invalid { .. })));
    let ext = base.with_overlay("extends = \"code\"\n", "approvals");
    assert!(matches!(ext, Err(PolicyError::Invalid { .. })));
    // A failing example refuses the overlay.
    let wrong = base.with_overlay(
        "[[example]]\ncommand = \"terraform plan\"\ndecision = \"allow\"\n",
        "approvals",
    );
    assert!(matches!(wrong, Err(PolicyError::Examples { .. })));
}
