//! One session's ledger in a file, for one-shot CLI calls
//! (`--session-file FILE`): each call loads it, and saves what it added.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::request::SessionId;
use crate::store::{LedgerRow, LedgerStore, StoreError};

/// A JSON file holding one ledger, whatever the session label.
#[derive(Debug)]
pub struct SessionFile {
    path: PathBuf,
    lock: Mutex<()>,
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct FileBody {
    version: u32,
    entries: Vec<LedgerRow>,
}

impl SessionFile {
    pub fn new(path: impl Into<PathBuf>) -> SessionFile {
        SessionFile {
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<FileBody, StoreError> {
        match std::fs::read(&self.path) {
            Ok(bytes) if bytes.is_empty() => Ok(FileBody::default()),
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| StoreError::Corrupt {
                key: self.path.display().to_string(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileBody::default()),
            Err(e) => Err(StoreError::Backend(Box::new(e))),
        }
    }
}

impl LedgerStore for SessionFile {
    fn ledger_load(&self, _session: &SessionId) -> Result<Vec<LedgerRow>, StoreError> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        Ok(self.read()?.entries)
    }

    fn ledger_save(
        &self,
        _session: &SessionId,
        upsert: &[LedgerRow],
        remove: &[String],
    ) -> Result<(), StoreError> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut body = self.read()?;
        body.version = 1;
        body.entries
            .retain(|r| !remove.contains(&r.key) && !upsert.iter().any(|u| u.key == r.key));
        body.entries.extend(upsert.iter().cloned());
        body.entries.sort_by_key(|r| r.tick);
        let json = serde_json::to_vec(&body).map_err(StoreError::Encode)?;
        // Written aside and renamed, so a crash leaves the old ledger whole.
        let tmp = self
            .path
            .with_extension(format!("tmp-{}", std::process::id()));
        let io = |e| StoreError::Backend(Box::new(e));
        std::fs::write(&tmp, json).map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }
}
