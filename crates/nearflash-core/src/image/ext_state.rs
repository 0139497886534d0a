//! Extension state kept with the image: `<dir>/ext/<name>.state`, one file per extension, replaced atomically.
//!
//! Layout: magic `NFEXT001`, payload length (u64 LE), CRC-32 of the payload (u32 LE), payload. A file that fails
//! these checks is refused with a message naming it, never handed to the extension.

use super::Image;
use crate::error::{Result, SimError};
use std::fs;

const MAGIC: &[u8; 8] = b"NFEXT001";
const HEADER: usize = 8 + 8 + 4;

impl Image {
    fn ext_state_path(&self, name: &str) -> std::path::PathBuf {
        self.dir().join("ext").join(format!("{name}.state"))
    }

    /// Stores `state` for extension `name` (atomically replacing the previous one).
    pub fn write_ext_state(&self, name: &str, state: &[u8]) -> Result<()> {
        let path = self.ext_state_path(name);
        fs::create_dir_all(path.parent().expect("ext dir"))?;
        let mut bytes = Vec::with_capacity(HEADER + state.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(state.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(state).to_le_bytes());
        bytes.extend_from_slice(state);
        super::write_atomic(&path, &bytes, self.durability == super::Durability::Fsync)
    }

    /// The state extension `name` saved, if any.
    pub fn read_ext_state(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.ext_state_path(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let damaged = |why: &str| SimError::Image(format!("{} is damaged ({why}); remove it to detach the saved state", path.display()));
        if bytes.len() < HEADER || &bytes[..8] != MAGIC {
            return Err(damaged("bad header"));
        }
        let len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
        let crc = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
        let payload = &bytes[HEADER..];
        if payload.len() as u64 != len {
            return Err(damaged("length mismatch"));
        }
        if crc32fast::hash(payload) != crc {
            return Err(damaged("checksum mismatch"));
        }
        Ok(Some(payload.to_vec()))
    }
}
