//! The persistent device image: a directory on the host file system.
//!
//! ```text
//! <dir>/nearflash.toml   the device's resolved preset (every value with unit and source)
//! <dir>/state.json       format version, clean-shutdown flag, materialised-data flag
//! <dir>/l2p.bin          mapping table, u32 per logical sector (sparse, mmap'd)
//! <dir>/oob.bin          OOB record per physical page (sparse, mmap'd)
//! <dir>/data.bin         sector data at physical addresses (sparse; holes punched on erase)
//! <dir>/checkpoint.bin   block table + sequence number of the last checkpoint (replaced atomically)
//! <dir>/trim.log         deallocations since the last checkpoint
//! <dir>/LOCK             held (flock) while a process has the device open
//! ```
//! A 512 GiB device opens in milliseconds and occupies only what was written. After a clean close the
//! checkpoint is current; after a crash (`kill -9`) the FTL replays the OOB area from the checkpoint on.

mod data;
mod ext_state;
mod journal;
mod mapped;

pub use data::DataStore;
pub use journal::{TrimJournal, TrimRecord};
pub use mapped::{MappedRecords, MappedU32};

use crate::config::{ConfigTree, DeviceConfig};
use crate::error::{Result, SimError};
use crate::ftl::{oob, BlockTable, Ftl, FtlStore};
use crate::nand::Geometry;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

const FORMAT: u32 = 1;
const CKPT_MAGIC: &[u8; 8] = b"NFCKPT01";

/// How durable a completed Flush is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Survives the process being killed (data is in the host's page cache).
    #[default]
    Process,
    /// Survives a host crash too: Flush and checkpoints fsync the files.
    Fsync,
}

#[derive(Debug, Serialize, Deserialize)]
struct State {
    format: u32,
    clean: bool,
    materialised: bool,
}

/// How the image was found when opened.
pub enum Opened {
    /// Clean shutdown: the checkpoint is current.
    Clean(BlockTable, u64),
    /// Crash: the checkpoint (if any) must be rolled forward from the OOB area.
    Unclean(Option<(BlockTable, u64)>),
}

pub struct Image {
    dir: PathBuf,
    _lock: File,
    durability: Durability,
    materialised: bool,
}

fn lock(dir: &Path) -> Result<File> {
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("LOCK"))?;
    // SAFETY: flock on an open descriptor.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(SimError::Image(format!("{} is open in another process", dir.display())));
    }
    Ok(f)
}

fn write_atomic(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if sync {
            f.sync_all()?;
        }
    }
    fs::rename(&tmp, path)?;
    Ok(())
}

impl Image {
    /// Creates a new image directory (which must not hold a device already).
    pub fn create(dir: &Path, tree: &ConfigTree, materialise: bool, durability: Durability) -> Result<(Image, FtlStore)> {
        let cfg = DeviceConfig::from_tree(tree)?;
        fs::create_dir_all(dir)?;
        if dir.join("state.json").exists() {
            return Err(SimError::Image(format!("{} already holds a device; open it or remove it", dir.display())));
        }
        let lock = lock(dir)?;
        fs::write(dir.join("nearflash.toml"), tree.to_toml_string())?;
        let img = Image { dir: dir.to_path_buf(), _lock: lock, durability, materialised: materialise };
        let store = img.store(&cfg)?;
        img.write_state(false)?;
        Ok((img, store))
    }

    /// Opens an existing image; returns its configuration and how it was left.
    pub fn open(dir: &Path, durability: Durability) -> Result<(Image, ConfigTree, FtlStore, Opened)> {
        let state_path = dir.join("state.json");
        let text = fs::read_to_string(&state_path)
            .map_err(|e| SimError::Image(format!("{} is not a nearflash device ({e})", dir.display())))?;
        let state: State =
            serde_json::from_str(&text).map_err(|e| SimError::Image(format!("{}: {e}", state_path.display())))?;
        if state.format != FORMAT {
            return Err(SimError::Image(format!("image format {} is not {FORMAT}", state.format)));
        }
        let lock = lock(dir)?;
        let tree_text = fs::read_to_string(dir.join("nearflash.toml"))?;
        let tree = ConfigTree::parse(&tree_text, &crate::config::preset_text)?;
        let cfg = DeviceConfig::from_tree(&tree)?;
        let img = Image { dir: dir.to_path_buf(), _lock: lock, durability, materialised: state.materialised };
        let store = img.store(&cfg)?;
        let geo = Geometry::from_config(&cfg);
        let ckpt = img.read_checkpoint(&geo)?;
        let opened = match (state.clean, ckpt) {
            (true, Some((b, s))) => Opened::Clean(b, s),
            (_, c) => Opened::Unclean(c),
        };
        img.write_state(false)?;
        Ok((img, tree, store, opened))
    }

    fn store(&self, cfg: &DeviceConfig) -> Result<FtlStore> {
        let geo = Geometry::from_config(cfg);
        let spp = geo.sectors_per_page as usize;
        Ok(FtlStore {
            l2p: MappedU32::open(&self.dir.join("l2p.bin"), cfg.logical_sectors())?,
            oob: MappedRecords::open(&self.dir.join("oob.bin"), oob::stride(spp), geo.pages())?,
            data: if self.materialised {
                DataStore::open(&self.dir.join("data.bin"), geo.sector_size, geo.page_size)?
            } else {
                DataStore::none(geo.sector_size, geo.page_size)
            },
            trims: TrimJournal::open(&self.dir.join("trim.log"))?,
        })
    }

    /// In-memory storage for a device without a directory (data kept in an unnamed temporary file).
    pub fn memory_store(cfg: &DeviceConfig, materialise: bool) -> Result<FtlStore> {
        let geo = Geometry::from_config(cfg);
        let spp = geo.sectors_per_page as usize;
        let data = if materialise {
            let dir = tempfile::tempdir()?;
            let ds = DataStore::open(&dir.path().join("data.bin"), geo.sector_size, geo.page_size)?;
            drop(dir); // the open file outlives its unlinked name
            ds
        } else {
            DataStore::none(geo.sector_size, geo.page_size)
        };
        Ok(FtlStore {
            l2p: MappedU32::anonymous(cfg.logical_sectors())?,
            oob: MappedRecords::anonymous(oob::stride(spp), geo.pages())?,
            data,
            trims: TrimJournal::none(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn materialised(&self) -> bool {
        self.materialised
    }

    fn write_state(&self, clean: bool) -> Result<()> {
        let s = State { format: FORMAT, clean, materialised: self.materialised };
        let text = serde_json::to_string_pretty(&s).expect("state serializes");
        write_atomic(&self.dir.join("state.json"), text.as_bytes(), self.durability == Durability::Fsync)
    }

    fn read_checkpoint(&self, geo: &Geometry) -> Result<Option<(BlockTable, u64)>> {
        let Ok(bytes) = fs::read(self.dir.join("checkpoint.bin")) else { return Ok(None) };
        if bytes.len() < 16 || &bytes[..8] != CKPT_MAGIC {
            return Err(SimError::Image("checkpoint.bin is damaged".into()));
        }
        let seq = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
        let table = BlockTable::from_bytes(&bytes[16..], geo.planes(), geo.blocks_per_plane)
            .ok_or_else(|| SimError::Image("checkpoint.bin does not match the geometry".into()))?;
        Ok(Some((table, seq)))
    }

    /// Makes the FTL's current state the recovery starting point: mapping and OOB written back, block table and
    /// sequence number replaced atomically, trim journal emptied.
    pub fn checkpoint(&self, ftl: &mut Ftl) -> Result<()> {
        let sync = self.durability == Durability::Fsync;
        ftl.store.l2p.flush()?;
        ftl.store.oob.flush()?;
        if sync {
            ftl.store.data.sync()?;
        }
        let (table, seq) = ftl.checkpoint_state();
        let mut bytes = Vec::with_capacity(16 + table.len());
        bytes.extend_from_slice(CKPT_MAGIC);
        bytes.extend_from_slice(&seq.to_le_bytes());
        bytes.extend_from_slice(&table);
        write_atomic(&self.dir.join("checkpoint.bin"), &bytes, sync)?;
        ftl.store.trims.clear()
    }

    /// Durability point of a Flush command (data, OOB and journal already hold everything flushed).
    pub fn flush(&self, ftl: &Ftl) -> Result<()> {
        if self.durability == Durability::Fsync {
            ftl.store.data.sync()?;
            ftl.store.oob.flush()?;
            ftl.store.l2p.flush()?;
            ftl.store.trims.sync()?;
        }
        Ok(())
    }

    /// Clean shutdown: checkpoint and mark clean.
    pub fn close(&self, ftl: &mut Ftl) -> Result<()> {
        self.checkpoint(ftl)?;
        self.write_state(true)
    }
}
