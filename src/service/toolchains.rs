//! Toolchains a policy opts into (`[sandbox] toolchains`), found in the
//! home of the user who owns the project: what runs may read (never
//! write), what goes on PATH, and the variables the tools look for.
//!
//! Only the parts a build needs are granted, not whole dot-directories:
//! `~/.cargo/credentials.toml` (a registry token) and `~/.local/share`
//! (keyrings, browser data) stay out of reach.

use std::path::{Path, PathBuf};

use crate::policy::Toolchain;

/// What the chosen toolchains add to every run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Toolchains {
    /// Read-only for the run (Landlock, and bound back into its mount
    /// namespace where homes are hidden).
    pub(crate) read: Vec<PathBuf>,
    /// Directories for the run's PATH, in order.
    pub(crate) bins: Vec<PathBuf>,
    /// Variables the tools read.
    pub(crate) env: Vec<(String, String)>,
}

impl Toolchains {
    /// The toolchains of `home` among `wanted`; missing ones add nothing.
    pub(crate) fn detect(home: &Path, wanted: &[Toolchain]) -> Toolchains {
        let mut t = Toolchains::default();
        for tc in wanted {
            match tc {
                Toolchain::Rustup => t.rustup(home),
                Toolchain::CargoRegistry => t.cargo_registry(home),
                Toolchain::Pyenv => t.pyenv(home),
                Toolchain::Nvm => t.nvm(home),
                Toolchain::UserLocal => t.user_local(home),
            }
        }
        t
    }

    fn read_dir(&mut self, p: PathBuf) -> bool {
        if !p.is_dir() {
            return false;
        }
        if !self.read.contains(&p) {
            self.read.push(p);
        }
        true
    }

    fn bin(&mut self, p: PathBuf) {
        if self.read_dir(p.clone()) && !self.bins.contains(&p) {
            self.bins.push(p);
        }
    }

    fn set(&mut self, k: &str, v: &Path) {
        if !self.env.iter().any(|(n, _)| n == k) {
            self.env
                .push((k.to_string(), v.to_string_lossy().into_owned()));
        }
    }

    fn rustup(&mut self, home: &Path) {
        let rustup = home.join(".rustup");
        let cargo = home.join(".cargo");
        if self.read_dir(rustup.clone()) {
            self.set("RUSTUP_HOME", &rustup);
        }
        self.bin(cargo.join("bin"));
        // Read-only: cargo builds with it (the lock it cannot take is
        // skipped), and target directories stay in the project.
        if cargo.is_dir() {
            self.set("CARGO_HOME", &cargo);
        }
    }

    fn cargo_registry(&mut self, home: &Path) {
        let cargo = home.join(".cargo");
        let registry = self.read_dir(cargo.join("registry"));
        let git = self.read_dir(cargo.join("git"));
        if registry || git {
            self.set("CARGO_HOME", &cargo);
            // What is not already in the cache cannot be fetched anyway.
            self.env.push(("CARGO_NET_OFFLINE".into(), "true".into()));
        }
    }

    fn pyenv(&mut self, home: &Path) {
        let root = home.join(".pyenv");
        if self.read_dir(root.clone()) {
            self.set("PYENV_ROOT", &root);
            self.bin(root.join("shims"));
            self.bin(root.join("bin"));
        }
    }

    fn nvm(&mut self, home: &Path) {
        let dir = home.join(".nvm");
        if !self.read_dir(dir.clone()) {
            return;
        }
        self.set("NVM_DIR", &dir);
        if let Some(node) = nvm_default(&dir) {
            self.bin(node.join("bin"));
        }
    }

    fn user_local(&mut self, home: &Path) {
        let local = home.join(".local");
        self.bin(local.join("bin"));
        // pip --user packages.
        self.read_dir(local.join("lib"));
    }
}

/// The node version nvm uses by default: `alias/default` (a version or
/// its prefix, `v20` or `20.11`), else the newest installed.
fn nvm_default(dir: &Path) -> Option<PathBuf> {
    let versions = dir.join("versions/node");
    let mut installed: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(&versions)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            Some((version_key(&name)?, e.path()))
        })
        .collect();
    installed.sort();
    let wanted = std::fs::read_to_string(dir.join("alias/default"))
        .ok()
        .and_then(|s| version_key(s.trim()));
    let pick = match wanted {
        Some(w) => installed
            .iter()
            .rev()
            .find(|(v, _)| v.starts_with(&w))
            .or(installed.last()),
        None => installed.last(),
    };
    pick.map(|(_, p)| p.clone())
}

/// `v20.11.1` or `20` as numbers; `None` for `lts/*` and other names.
fn version_key(s: &str) -> Option<Vec<u64>> {
    let s = s.strip_prefix('v').unwrap_or(s);
    s.split('.').map(|p| p.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_exists_and_only_the_build_parts() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for d in [
            ".cargo/bin",
            ".cargo/registry",
            ".rustup",
            ".nvm/versions/node/v18.19.0/bin",
            ".nvm/versions/node/v20.11.1/bin",
            ".nvm/versions/node/v20.9.0/bin",
            ".nvm/alias",
            ".local/bin",
            ".local/share/keyrings",
        ] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        std::fs::write(h.join(".nvm/alias/default"), "20\n").unwrap();
        std::fs::write(h.join(".cargo/credentials.toml"), "token").unwrap();
        let all = [
            Toolchain::Rustup,
            Toolchain::CargoRegistry,
            Toolchain::Pyenv,
            Toolchain::Nvm,
            Toolchain::UserLocal,
        ];
        let t = Toolchains::detect(h, &all);
        assert_eq!(
            t.bins,
            [
                h.join(".cargo/bin"),
                h.join(".nvm/versions/node/v20.11.1/bin"),
                h.join(".local/bin")
            ]
        );
        // Never the whole ~/.cargo (credentials) or ~/.local (keyrings).
        assert!(!t.read.contains(&h.join(".cargo")), "{:?}", t.read);
        assert!(!t.read.iter().any(|p| p.starts_with(h.join(".local/share"))));
        assert!(t.read.contains(&h.join(".cargo/registry")));
        let var = |k: &str| t.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(
            var("RUSTUP_HOME"),
            Some(h.join(".rustup").display().to_string())
        );
        assert_eq!(
            var("CARGO_HOME"),
            Some(h.join(".cargo").display().to_string())
        );
        assert_eq!(var("PYENV_ROOT"), None);
        // Nothing asked, nothing added.
        assert_eq!(Toolchains::detect(h, &[]), Toolchains::default());
    }
}
