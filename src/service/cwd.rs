//! Stage 2: the working directory, which the policy's path checks are
//! relative to.

use std::path::{Path, PathBuf};

use super::refusal::Refusal;

/// The root, or a directory inside it. Symlinks are resolved before the
/// containment check, so a link cannot lead out.
pub(crate) fn resolve_cwd(root: &Path, cwd: Option<&str>) -> Result<PathBuf, Refusal> {
    let Some(cwd) = cwd.filter(|c| !c.is_empty()) else {
        return Ok(root.to_path_buf());
    };
    match std::fs::canonicalize(root.join(cwd)) {
        Ok(p) if p.starts_with(root) && p.is_dir() => Ok(p),
        Ok(p) if !p.starts_with(root) => Err(Refusal::CwdOutside {
            cwd: cwd.to_string(),
            resolved: p,
            root: root.to_path_buf(),
        }),
        Ok(_) => Err(Refusal::InvalidArguments(format!(
            "cwd: {cwd:?} is not a directory"
        ))),
        Err(_) => Err(Refusal::InvalidArguments(format!(
            "cwd: {cwd:?} does not exist inside the project root"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cwd_stays_inside_the_root_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("file"), "x").unwrap();
        std::os::unix::fs::symlink("/", root.join("up")).unwrap();

        assert_eq!(resolve_cwd(&root, None), Ok(root.clone()));
        assert_eq!(resolve_cwd(&root, Some("")), Ok(root.clone()));
        assert_eq!(resolve_cwd(&root, Some("sub")), Ok(root.join("sub")));
        assert_eq!(
            resolve_cwd(&root, Some("up")),
            Err(Refusal::CwdOutside {
                cwd: "up".into(),
                resolved: "/".into(),
                root: root.clone(),
            })
        );
        assert!(matches!(
            resolve_cwd(&root, Some("..")),
            Err(Refusal::CwdOutside { .. })
        ));
        assert_eq!(
            resolve_cwd(&root, Some("file")),
            Err(Refusal::InvalidArguments(
                "cwd: \"file\" is not a directory".into()
            ))
        );
        assert_eq!(
            resolve_cwd(&root, Some("nope")),
            Err(Refusal::InvalidArguments(
                "cwd: \"nope\" does not exist inside the project root".into()
            ))
        );
    }
}
