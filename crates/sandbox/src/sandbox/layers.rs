//! Which layers a sandbox applies: each layer's level
//! ([`SandboxConfig::requirement`]) against what the host offers, decided
//! once in `Sandbox::prepare`. A missing layer is an error naming it when
//! required and a `not_applied` entry under best effort; a layer that is
//! off is not applied even where the kernel has it. The summary is built
//! from these decisions, so it says what was applied, not what was asked.

use crate::config::{Layer, Requirement, SandboxConfig};
use crate::error::SandboxError;
use crate::plan::{cgroup, landlock, seccomp};
use crate::spawn::Creds;

/// Name of the debug-only switch that makes `prepare` act as if the
/// layers it lists (comma-separated [`Layer`] names) were missing on this
/// host: tests of the fail-closed and best-effort paths.
#[cfg(debug_assertions)]
pub const TEST_MISSING_LAYERS_ENV: &str = "AGENT_EXEC_TEST_MISSING_LAYERS";

/// What the summary reports besides the applied layers.
#[derive(Default)]
pub(super) struct Notes {
    pub not_applied: Vec<String>,
    pub warnings: Vec<String>,
}

/// Whether a debug build was told to act as if `layer` were missing.
fn simulated_missing(layer: Layer) -> bool {
    #[cfg(debug_assertions)]
    {
        std::env::var(TEST_MISSING_LAYERS_ENV)
            .is_ok_and(|v| v.split(',').any(|n| n.trim() == layer.name()))
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = layer;
        false
    }
}

/// Whether to apply `layer`, given whether the host offers it (`Err`:
/// why not). A missing required layer is an error; a missing best-effort
/// one is listed in `not_applied`.
fn decide(
    cfg: &SandboxConfig,
    layer: Layer,
    offered: Result<(), String>,
    notes: &mut Notes,
) -> Result<bool, SandboxError> {
    let offered = if offered.is_ok() && simulated_missing(layer) {
        Err("absent (simulated by a test switch)".to_string())
    } else {
        offered
    };
    match (cfg.requirement(layer), offered) {
        (Requirement::Off, _) => Ok(false),
        (_, Ok(())) => Ok(true),
        (Requirement::Required, Err(reason)) => Err(SandboxError::Required { layer, reason }),
        (Requirement::BestEffort, Err(_)) => {
            notes.not_applied.push(layer.name().to_string());
            Ok(false)
        }
    }
}

/// When a layer is not applied, neither are its parts: an error for a part
/// that is needed (`(part, needed)`) and required on its own account.
/// Otherwise the whole's entry in `not_applied` (if any) says it all.
fn without_whole(
    cfg: &SandboxConfig,
    parts: &[(Layer, bool)],
    why: &str,
) -> Result<(), SandboxError> {
    for &(layer, needed) in parts {
        if needed && cfg.requirement(layer) == Requirement::Required {
            return Err(SandboxError::Required {
                layer,
                reason: why.to_string(),
            });
        }
    }
    Ok(())
}

/// The Landlock layers to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LandlockChoice {
    /// The ABI the kernel offers (0: none).
    pub abi: u32,
    /// Filesystem rules apply (the others need them).
    pub fs: bool,
    /// TCP port rules apply.
    pub net: bool,
    /// Signal and abstract-socket scopes apply.
    pub scopes: bool,
}

impl LandlockChoice {
    /// The summary's word for it.
    pub fn level(&self) -> &'static str {
        match self {
            LandlockChoice { fs: false, .. } => "none",
            LandlockChoice {
                abi: 6..,
                net: true,
                scopes: true,
                ..
            } => "full",
            _ => "partial",
        }
    }
}

/// The Landlock layers, checked against the kernel's ABI. `inet`: the
/// configuration allows TCP ports, so the port rules are needed (without
/// ports the seccomp filter refuses every TCP socket anyway).
pub(super) fn landlock(
    cfg: &SandboxConfig,
    inet: bool,
    notes: &mut Notes,
) -> Result<LandlockChoice, SandboxError> {
    #[cfg(debug_assertions)]
    let abi = if std::env::var_os(super::prepare::TEST_NO_LANDLOCK_ENV).is_some() {
        0
    } else {
        landlock::abi()
    };
    #[cfg(not(debug_assertions))]
    let abi = landlock::abi();
    let none = LandlockChoice {
        abi,
        fs: false,
        net: false,
        scopes: false,
    };
    let offered = match abi {
        0 => Err(
            "the kernel offers no Landlock (needs Linux 5.13+ with landlock in the lsm= list)"
                .to_string(),
        ),
        _ => Ok(()),
    };
    if !decide(cfg, Layer::Landlock, offered, notes)? {
        let parts = [(Layer::LandlockNet, inet), (Layer::LandlockScopes, true)];
        without_whole(cfg, &parts, "Landlock itself is not applied")?;
        return Ok(none);
    }
    for (min, what) in [
        (2, "landlock_refer"),
        (3, "landlock_truncate"),
        (5, "landlock_ioctl_dev"),
    ] {
        if abi < min {
            notes.not_applied.push(what.to_string());
        }
    }
    let net_offered = match abi {
        4.. => Ok(()),
        _ => Err(format!(
            "TCP port rules need Landlock ABI 4, the kernel offers {abi}"
        )),
    };
    let net = if inet {
        decide(cfg, Layer::LandlockNet, net_offered, notes)?
    } else {
        // Not needed: the seccomp filter refuses TCP sockets. Still
        // handled where the kernel can, and its absence still noted.
        let here = net_offered.is_ok() && !simulated_missing(Layer::LandlockNet);
        if !here {
            notes
                .not_applied
                .push(Layer::LandlockNet.name().to_string());
        }
        here && cfg.requirement(Layer::LandlockNet) != Requirement::Off
    };
    let scopes_offered = match abi {
        6.. => Ok(()),
        _ => Err(format!(
            "signal and abstract-socket scopes need Landlock ABI 6, the kernel offers {abi}"
        )),
    };
    let scopes = decide(cfg, Layer::LandlockScopes, scopes_offered, notes)?;
    Ok(LandlockChoice {
        abi,
        fs: true,
        net,
        scopes,
    })
}

/// The compiled filter, when the seccomp layer applies.
pub(super) fn seccomp_program(
    cfg: &SandboxConfig,
    options: seccomp::Options,
    notes: &mut Notes,
) -> Result<Option<Vec<libc::sock_filter>>, SandboxError> {
    let offered = if crate::spawn::sys::seccomp_filter_available() {
        Ok(())
    } else {
        Err("the kernel refuses seccomp filters".to_string())
    };
    if decide(cfg, Layer::Seccomp, offered, notes)? {
        seccomp::build(options).map(Some)
    } else {
        Ok(None)
    }
}

/// The run cgroups to make: the host's layout without what is off or
/// missing, and the limits that then apply (0: none).
#[derive(Debug, Clone, Default)]
pub(super) struct CgroupChoice {
    pub layout: cgroup::Layout,
    pub pids_max: u64,
    pub memory_max: u64,
    /// The levels `Sandbox::for_run` holds each run's cgroup to.
    pub levels: CgroupLevels,
}

/// The levels of the cgroup layers, for the per-run check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CgroupLevels {
    pub cgroup: Requirement,
    pub pids: Requirement,
    pub memory: Requirement,
}

impl Default for CgroupLevels {
    fn default() -> Self {
        CgroupLevels {
            cgroup: Requirement::Off,
            pids: Requirement::Off,
            memory: Requirement::Off,
        }
    }
}

/// The cgroup layers, checked against the host's layout.
pub(super) fn cgroups(
    cfg: &SandboxConfig,
    host: &cgroup::Layout,
    notes: &mut Notes,
) -> Result<CgroupChoice, SandboxError> {
    let mut layout = if simulated_missing(Layer::Cgroup) {
        cgroup::Layout::default()
    } else {
        host.clone()
    };
    let offered = if layout.any() {
        Ok(())
    } else {
        Err("no cgroup hierarchy accepts a run cgroup here (a read-only cgroupfs, or a supervisor that is not root and has no delegated subtree)".to_string())
    };
    if !decide(cfg, Layer::Cgroup, offered, notes)? {
        let parts = [
            (Layer::CgroupPids, cfg.pids_max > 0),
            (Layer::CgroupMemory, cfg.memory_max_bytes > 0),
        ];
        without_whole(cfg, &parts, "the run gets no cgroup")?;
        return Ok(CgroupChoice::default());
    }
    let mut choice = CgroupChoice {
        levels: CgroupLevels {
            cgroup: cfg.requirement(Layer::Cgroup),
            pids: cfg.requirement(Layer::CgroupPids),
            memory: cfg.requirement(Layer::CgroupMemory),
        },
        ..CgroupChoice::default()
    };
    if cfg.pids_max > 0 {
        let offered = match layout.v2_pids || layout.v1_pids.is_some() {
            true => Ok(()),
            false => Err("no cgroup hierarchy here has the pids controller".to_string()),
        };
        if decide(cfg, Layer::CgroupPids, offered, notes)? {
            choice.pids_max = cfg.pids_max;
        }
    }
    if choice.pids_max == 0 {
        layout.v2_pids = false;
        layout.v1_pids = None;
    }
    if cfg.memory_max_bytes > 0 {
        let offered = match layout.v2_memory || layout.v1_memory.is_some() {
            true => Ok(()),
            false => Err("no cgroup hierarchy here has the memory controller".to_string()),
        };
        if decide(cfg, Layer::CgroupMemory, offered, notes)? {
            choice.memory_max = cfg.memory_max_bytes;
        }
    }
    if choice.memory_max == 0 {
        layout.v2_memory = false;
        layout.v1_memory = None;
    }
    choice.layout = layout;
    Ok(choice)
}

/// A child running as uid 0 needs Landlock's signal scope, in strict and
/// best effort alike: without it the child may signal every process of
/// uid 0 (kill(2) needs no capability between processes of the same
/// uid), the supervisor and the host's services included, which no other
/// layer stops. No setting can make that acceptable, so it is not a level.
pub(super) fn check_root_child(
    creds: &Creds,
    landlock: &LandlockChoice,
    cfg: &SandboxConfig,
) -> Result<(), SandboxError> {
    if creds.uid != 0 || landlock.scopes {
        return Ok(());
    }
    let reason = if cfg.requirement(Layer::LandlockScopes) == Requirement::Off {
        "the policy turns landlock_scopes off".to_string()
    } else if !landlock.fs {
        "Landlock is not applied".to_string()
    } else {
        format!(
            "the kernel offers Landlock ABI {}, scopes need 6",
            landlock.abi
        )
    };
    Err(SandboxError::RootChildUnscoped { reason })
}

/// Checks one run's cgroup against the levels: a required layer that the
/// run did not get (the host has the controller, but writing the limit
/// failed) refuses the run. Returns what best effort lets go, for
/// `not_applied`.
pub(crate) fn check_run_cgroup(
    levels: &CgroupLevels,
    pids_max: u64,
    memory_max: u64,
    applied: Option<&[String]>,
) -> Result<Vec<&'static str>, SandboxError> {
    let mut missing = Vec::new();
    let Some(applied) = applied else {
        if levels.cgroup == Requirement::Off {
            return Ok(missing);
        }
        if levels.cgroup == Requirement::Required {
            return Err(SandboxError::Required {
                layer: Layer::Cgroup,
                reason: "the run's cgroup could not be created".into(),
            });
        }
        missing.push(Layer::Cgroup.name());
        return Ok(missing);
    };
    let has = |p: &str| applied.iter().any(|a| a.starts_with(p));
    for (layer, level, wanted, key) in [
        (Layer::CgroupPids, levels.pids, pids_max, "cgroup_pids_max"),
        (
            Layer::CgroupMemory,
            levels.memory,
            memory_max,
            "cgroup_memory_max",
        ),
    ] {
        if wanted == 0 || has(key) {
            continue;
        }
        if level == Requirement::Required {
            return Err(SandboxError::Required {
                layer,
                reason: "the run's cgroup did not accept the limit".into(),
            });
        }
        missing.push(layer.name());
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Enforcement;

    fn cfg(enforcement: Enforcement) -> SandboxConfig {
        SandboxConfig {
            enforcement,
            ..SandboxConfig::new(vec![])
        }
    }

    #[test]
    fn a_missing_layer_fails_closed_when_required_and_is_listed_otherwise() {
        let mut notes = Notes::default();
        let strict = cfg(Enforcement::Strict);
        let e = decide(&strict, Layer::Seccomp, Err("gone".into()), &mut notes).unwrap_err();
        assert_eq!(e.layer(), "seccomp");
        assert!(notes.not_applied.is_empty());

        let best = cfg(Enforcement::BestEffort);
        assert!(!decide(&best, Layer::Seccomp, Err("gone".into()), &mut notes).unwrap());
        assert_eq!(notes.not_applied, ["seccomp"]);
        assert!(decide(&best, Layer::Seccomp, Ok(()), &mut notes).unwrap());

        // Off: neither applied nor listed, present or not.
        let mut off = cfg(Enforcement::Strict);
        off.require.seccomp = Some(Requirement::Off);
        let mut notes = Notes::default();
        assert!(!decide(&off, Layer::Seccomp, Ok(()), &mut notes).unwrap());
        assert!(!decide(&off, Layer::Seccomp, Err("gone".into()), &mut notes).unwrap());
        assert!(notes.not_applied.is_empty());
    }

    #[test]
    fn the_landlock_word_follows_what_applies() {
        let all = LandlockChoice {
            abi: 7,
            fs: true,
            net: true,
            scopes: true,
        };
        assert_eq!(all.level(), "full");
        assert_eq!(
            LandlockChoice {
                scopes: false,
                ..all
            }
            .level(),
            "partial"
        );
        assert_eq!(LandlockChoice { abi: 5, ..all }.level(), "partial");
        assert_eq!(LandlockChoice { fs: false, ..all }.level(), "none");
    }

    #[test]
    fn a_root_child_needs_the_signal_scope_whatever_the_enforcement() {
        let root = Creds {
            uid: 0,
            gid: 0,
            privileged: true,
        };
        let scoped = LandlockChoice {
            abi: 6,
            fs: true,
            net: true,
            scopes: true,
        };
        for enforcement in [Enforcement::Strict, Enforcement::BestEffort] {
            let c = cfg(enforcement);
            assert!(check_root_child(&root, &scoped, &c).is_ok());
            let unscoped = LandlockChoice {
                abi: 5,
                scopes: false,
                ..scoped
            };
            let e = check_root_child(&root, &unscoped, &c).unwrap_err();
            assert_eq!(e.layer(), "landlock_scopes");
            assert!(e.to_string().contains("ABI 5"), "{e}");
            // Any other uid is not concerned.
            let user = Creds { uid: 1000, ..root };
            assert!(check_root_child(&user, &unscoped, &c).is_ok());
        }
    }

    #[test]
    fn a_run_cgroup_is_held_to_the_levels() {
        let levels = CgroupLevels {
            cgroup: Requirement::Required,
            pids: Requirement::BestEffort,
            memory: Requirement::Required,
        };
        let all = [
            "cgroup_pids_max=256".to_string(),
            "cgroup_memory_max=1".into(),
        ];
        assert!(
            check_run_cgroup(&levels, 256, 1, Some(&all))
                .unwrap()
                .is_empty()
        );
        let e = check_run_cgroup(&levels, 256, 1, None).unwrap_err();
        assert_eq!(e.layer(), "cgroup");
        let e = check_run_cgroup(&levels, 256, 1, Some(&all[..1])).unwrap_err();
        assert_eq!(e.layer(), "cgroup_memory");
        assert_eq!(
            check_run_cgroup(&levels, 256, 1, Some(&all[1..])).unwrap(),
            ["cgroup_pids"]
        );
        // A limit that is not asked for is not missing.
        assert!(
            check_run_cgroup(&levels, 0, 0, Some(&[]))
                .unwrap()
                .is_empty()
        );
    }
}
